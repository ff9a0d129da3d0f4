package redisstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/limitertest"
	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
)

// Two application servers with 32 goroutines each take random amounts of
// one key with AllowAtMost: the script retries with what fits inside one
// atomic call, so the units admitted in all are exactly the quota.
func TestAllowAtMostIsExactUnderContention(t *testing.T) {
	srv := redistest.Single(t)
	var stores []limiter.Store
	for i := 0; i < 2; i++ {
		stores = append(stores, newStore(t, redisstore.ClientConfig{URL: srv.URL(), PoolSize: 16}))
	}
	t.Logf("units admitted: %v", limitertest.AtMostContention(t, stores, 32))
}

// A peek is one script call that writes nothing: an unknown key stays
// unknown, and a known key's state is byte for byte what it was. A reset
// deletes every key the algorithm keeps.
func TestPeekWritesNothingAndResetDeletesEveryKey(t *testing.T) {
	srv := redistest.Single(t)
	store := newStore(t, redisstore.ClientConfig{URL: srv.URL()})
	ctx := context.Background()
	for _, a := range limiter.AllAlgorithms() {
		t.Run(string(a), func(t *testing.T) {
			lim := limiter.Limit{Algorithm: a, Rate: 5, Period: time.Hour}
			l, err := limiter.New(limiter.Config{Limit: lim, Store: store, FailPolicy: limiter.FailClosed, Timeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			key := "peek-writes-nothing:" + string(a)
			keys := store.Keys(key, a)
			exists := func() int64 {
				args := append([]string{"EXISTS"}, keys...)
				n, err := srv.Do(args...)
				if err != nil {
					t.Fatal(err)
				}
				return n.(int64)
			}
			for i := 0; i < 3; i++ {
				if _, err := l.PeekN(ctx, key, 2); err != nil {
					t.Fatal(err)
				}
			}
			if n := exists(); n != 0 {
				t.Fatalf("peeks at an unknown key created %d of its keys %v", n, keys)
			}
			if _, err := l.AllowN(ctx, key, 2); err != nil {
				t.Fatal(err)
			}
			dump := func() string {
				var out string
				for _, k := range keys {
					v, err := srv.Do("DUMP", k)
					if err != nil {
						t.Fatal(err)
					}
					out += fmt.Sprintf("%q;", v)
				}
				return out
			}
			before := dump()
			for _, cost := range []int64{1, 3, 4, 5} { // admitted and refused peeks
				if _, err := l.PeekN(ctx, key, cost); err != nil {
					t.Fatal(err)
				}
			}
			if after := dump(); after != before {
				t.Fatalf("peeks changed the state of %v", keys)
			}
			if err := l.Reset(ctx, key); err != nil {
				t.Fatal(err)
			}
			if n := exists(); n != 0 {
				t.Fatalf("after Reset %d of the keys %v remain", n, keys)
			}
		})
	}
}
