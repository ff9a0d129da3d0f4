package limiter_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// BenchmarkReserveCommit is a reserve and its commit on the memory store,
// beside BenchmarkAllowN's plain decision of the same cost and a charge.
func BenchmarkReserveCommit(b *testing.B) {
	for _, name := range []string{"allow", "reserve+commit", "charge"} {
		plain := name == "allow"
		b.Run(name, func(b *testing.B) {
			l, err := limiter.New(limiter.Config{Limit: limiter.Limit{Algorithm: limiter.GCRA, Rate: 1_000_000, Period: time.Second},
				Store: limiter.NewMemoryStore(limiter.MemoryConfig{})})
			if err != nil {
				b.Fatal(err)
			}
			keys := make([]string, 1024)
			for i := range keys {
				keys[i] = "k" + strconv.Itoa(i)
			}
			ctx := context.Background()
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					key := keys[i%len(keys)]
					i++
					if plain {
						if _, err := l.AllowN(ctx, key, 2); err != nil {
							b.Fatal(err)
						}
						continue
					}
					if name == "charge" {
						if _, err := l.Charge(ctx, key, 2); err != nil {
							b.Fatal(err)
						}
						continue
					}
					r, _, err := l.Reserve(ctx, key, 2)
					if err == nil {
						_, err = l.Commit(ctx, r, 1)
					}
					if err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
