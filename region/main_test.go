package region_test

import (
	"testing"

	"github.com/rl-exporter/rl-exporter/internal/leakcheck"
)

// TestMain fails the package's tests if any goroutine they started (a
// shipper, a relay) is still running once they have ended.
func TestMain(m *testing.M) { leakcheck.Main(m, nil) }
