package redisstore_test

import (
	"testing"

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
