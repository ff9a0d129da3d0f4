package region_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/region"
)

// BenchmarkDecide is one region's decision on its own Redis (no latency to
// peers), in local mode (the single-region store) and in async and hybrid
// below the threshold (one multi-region script call and a key marked for
// shipping), on 1,000 keys.
func BenchmarkDecide(b *testing.B) {
	w := newWorld(b, worldConfig{regions: []string{"eu", "us"}})
	for _, m := range []region.Mode{region.ModeLocal, region.ModeAsync, region.ModeHybrid} {
		for _, a := range []limiter.Algorithm{limiter.FixedWindow, limiter.GCRA} {
			b.Run(fmt.Sprintf("%s/%s", m, a), func(b *testing.B) {
				st, err := w.sets["eu"].Store(m, region.StoreOptions{})
				if err != nil {
					b.Fatal(err)
				}
				lim := limiter.Limit{Algorithm: a, Rate: 1_000_000, Period: time.Hour}
				ctx := context.Background()
				keys := make([]string, 1000)
				for i := range keys {
					keys[i] = fmt.Sprintf("bench-%d", i)
				}
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					if _, err := st.Decide(ctx, keys[i%len(keys)], lim, 1); err != nil {
						b.Fatal(err)
					}
					i++
				}
			})
		}
	}
}
