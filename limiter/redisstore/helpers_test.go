package redisstore_test

import (
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
)

// newStore returns a Store with the default Config on a new client built
// from cc.
func newStore(t testing.TB, cc redisstore.ClientConfig) *redisstore.Store {
	t.Helper()
	return redisstore.NewTestStore(t, cc, redisstore.Config{})
}

// newCountingStore returns a Store with cfg on a new client built from cc,
// and the counter of the decisions it sends together with others.
func newCountingStore(t testing.TB, cc redisstore.ClientConfig, cfg redisstore.Config) (*redisstore.Store, *redisstore.BatchCounter) {
	t.Helper()
	counter := new(redisstore.BatchCounter)
	cfg.BatchTracer = counter
	return redisstore.NewTestStore(t, cc, cfg), counter
}

// eventually polls cond every few milliseconds until it holds, and fails
// the test with what's message once within has passed.
func eventually(t testing.TB, within time.Duration, what func() string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal(what())
		}
		<-tick.C
	}
}
