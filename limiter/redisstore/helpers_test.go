package redisstore_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
)

// newClient builds a client from cfg and closes it when the test ends.
func newClient(t testing.TB, cfg redisstore.ClientConfig) redis.UniversalClient {
	t.Helper()
	c, err := cfg.NewClient()
	if err != nil {
		t.Fatalf("new redis client: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// newStore returns a Store on a new client built from cfg.
func newStore(t testing.TB, cfg redisstore.ClientConfig) *redisstore.Store {
	t.Helper()
	s, err := redisstore.New(newClient(t, cfg), redisstore.Config{})
	if err != nil {
		t.Fatalf("redisstore.New: %v", err)
	}
	return s
}
