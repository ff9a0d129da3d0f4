package main

import (
	"context"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// memoryRate is high enough that no key is ever refused at the rates a
// 2-core machine reaches: 10 million per minute per key.
const memoryRate = 10_000_000

func memoryContenders() ([]contender, error) {
	var cs []contender
	for _, alg := range []limiter.Algorithm{limiter.GCRA, limiter.TokenBucket, limiter.FixedWindow} {
		lim, err := limiter.New(limiter.Config{
			Limit: limiter.PerMinute(alg, memoryRate),
			Store: limiter.NewMemoryStore(limiter.MemoryConfig{}),
		})
		if err != nil {
			return nil, err
		}
		cs = append(cs, contender{store: "memory", name: "rl-exporter " + string(alg), decide: allowFunc(lim)})
	}
	x := newXrateMap()
	cs = append(cs, contender{store: "memory", name: "x/time/rate + mutex map", baseline: true, decide: x.decide})
	return cs, nil
}

func allowFunc(lim *limiter.Limiter) func(ctx context.Context, key string) (bool, error) {
	return func(ctx context.Context, key string) (bool, error) {
		d, err := lim.Allow(ctx, key)
		if err != nil {
			return false, err
		}
		return d.Allowed, nil
	}
}

// xrateMap is the usual way to limit per key with golang.org/x/time/rate: a
// map of token-bucket limiters, created on first use, behind one mutex.
type xrateMap struct {
	mu    sync.Mutex
	m     map[string]*rate.Limiter
	limit rate.Limit
	burst int
}

// newXrateMap returns an empty map whose limiters allow memoryRate per
// minute with a burst of as much.
func newXrateMap() *xrateMap {
	return &xrateMap{limit: rate.Limit(float64(memoryRate) / time.Minute.Seconds()), burst: memoryRate, m: map[string]*rate.Limiter{}}
}

func (x *xrateMap) decide(_ context.Context, key string) (bool, error) {
	x.mu.Lock()
	l, ok := x.m[key]
	if !ok {
		l = rate.NewLimiter(x.limit, x.burst)
		x.m[key] = l
	}
	x.mu.Unlock()
	return l.Allow(), nil
}
