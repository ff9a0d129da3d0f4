package heartbeat_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine they started (a
// heartbeat that was not closed) is still running once they have all ended.
// go-redis's maintenance-notification manager keeps a cleanup goroutine
// after its client has closed: not this package's.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("github.com/redis/go-redis/v9/maintnotifications.(*CircuitBreakerManager).cleanupLoop"))
}
