package shares_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/shares"
)

// BenchmarkSharesAllow is a decision from shares on 100 keys of a limit never reached, from
// parallel callers: the local path, with the reservations and give-backs it amortises.
func BenchmarkSharesAllow(b *testing.B) {
	srv := redistest.Single(b)
	st, err := shares.New(shares.Config{Store: newRedisStore(b, srv), Timeout: 5 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close(context.Background()) })
	l := newLimiter(b, limiter.PerMinute(limiter.GCRA, 1_000_000), st)
	keys := make([]string, 100)
	for i := range keys {
		keys[i] = "k" + strconv.Itoa(i)
	}
	var next atomic.Int64
	b.SetParallelism(128) // 256 callers on 2 cores, as bench --concurrency 256
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := int(next.Add(7919))
		for pb.Next() {
			i++
			if _, err := l.Allow(context.Background(), keys[i%len(keys)]); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
