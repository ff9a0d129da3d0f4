package main

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
	"github.com/rl-exporter/rl-exporter/loadgen"
)

// rlExporterRedis builds rl-exporter's gcra and fixed_window limiters on one
// store, on a client of its own configured the way rl-exporter serve
// configures it (redisstore.ClientConfig), and a gcra limiter on a store of
// the same client with batching off, which shows what batching adds.
func rlExporterRedis(ctx context.Context, url string, s *redisSet) (gcra, fixed, gcraUnbatched loadgen.DecideFunc, desc string, err error) {
	cc := redisstore.ClientConfig{URL: url}
	opts, err := cc.Options()
	if err != nil {
		return nil, nil, nil, "", fmt.Errorf("--redis-url: %w", err)
	}
	client := redis.NewUniversalClient(opts)
	s.clients = append(s.clients, client)
	store, err := redisstore.New(client, redisstore.Config{Prefix: "rl-compare"})
	if err != nil {
		return nil, nil, nil, "", err
	}
	// The same store with batching off: one script call per decision.
	unbatched, err := redisstore.New(client, redisstore.Config{Prefix: "rl-compare", Batch: redisstore.BatchConfig{Disabled: true}})
	if err != nil {
		return nil, nil, nil, "", err
	}
	var fns []loadgen.DecideFunc
	for _, alg := range []limiter.Algorithm{limiter.GCRA, limiter.FixedWindow} {
		// A deadline as in production, but long enough that a busy shared
		// machine does not turn slow calls into errors: peers have none.
		lim, err := limiter.New(limiter.Config{Limit: limiter.PerMinute(alg, redisRate), Store: store, Timeout: time.Second})
		if err != nil {
			return nil, nil, nil, "", err
		}
		fns = append(fns, allowFunc(lim))
	}
	lim, err := limiter.New(limiter.Config{Limit: limiter.PerMinute(limiter.GCRA, redisRate), Store: unbatched, Timeout: time.Second})
	if err != nil {
		return nil, nil, nil, "", err
	}
	return fns[0], fns[1], allowFunc(lim), fmt.Sprintf("rl-exporter's client from redisstore.ClientConfig, pool size %d", opts.PoolSize), nil
}
