package redisstore_test

import (
	poll "github.com/rl-exporter/rl-exporter/internal/eventually"
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

// eventually fails the test with what's message unless cond holds within.
func eventually(t testing.TB, within time.Duration, what func() string, cond func() bool) {
	t.Helper()
	if !poll.Within(within, cond) {
		t.Fatal(what())
	}
}
