package redisstore_test

import (
	"testing"

	"github.com/rl-exporter/rl-exporter/internal/leakcheck"
)

// TestMain fails the package's tests if any goroutine they started is still
// running once they have ended and the store's idle batch senders have had
// the time they take to exit.
func TestMain(m *testing.M) { leakcheck.Main(m, nil) }
