package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/limiter"
)

// BenchmarkClientCPU measures our CPU per decision (cpu-µs/op) of the two
// mechanisms that save it, not Redis's, from one goroutine, where
// scheduling adds the least noise: raw-replies reads script replies of 1
// and of DefaultBatchMaxSize decisions (five integers each, from a script
// that only answers them) raw (resp.go) and through go-redis's parser;
// own-conn makes decisions alone (the direct path) on the store's own
// connection and through the pool's checkout. on is the store as it runs,
// off the mechanism switched off (SwitchOff).
func BenchmarkClientCPU(b *testing.B) {
	srv := redistest.Single(b)
	answer := newScript("local out = {}\nfor i = 1, tonumber(ARGV[1]) * 5 do out[i] = 1000000 + i end\nreturn out\n")
	for _, n := range []int{1, DefaultBatchMaxSize} {
		for _, state := range []string{"on", "off"} {
			b.Run(fmt.Sprintf("raw-replies/decisions=%d/%s", n, state), func(b *testing.B) {
				s := NewTestStore(b, ClientConfig{URL: srv.URL()}, Config{})
				if state == "off" {
					if err := s.SwitchOff("raw-replies"); err != nil {
						b.Fatal(err)
					}
				}
				conn := s.single.Conn()
				defer conn.Close()
				var r request
				nn := int64(n)
				args := []any{nil, nil, 0, &nn}
				ctx := context.Background()
				calls := max(b.N/n, 1)
				measureCPU(b, calls*n, func() {
					for i := 0; i < calls; i++ {
						ints, err := s.run(ctx, conn, &answer, args, &r.raw, r.ints[:0])
						if err != nil || len(ints) != 5*n {
							b.Fatalf("%d integers, %v", len(ints), err)
						}
						r.ints = ints
					}
				})
			})
		}
	}
	lim := limiter.Limit{Algorithm: limiter.GCRA, Rate: 100_000_000, Period: time.Second}
	for _, state := range []string{"on", "off"} {
		b.Run("own-conn/alone/"+state, func(b *testing.B) {
			s := NewTestStore(b, ClientConfig{URL: srv.URL()}, Config{})
			if state == "off" {
				if err := s.SwitchOff("own-conn"); err != nil {
					b.Fatal(err)
				}
			}
			ctx := context.Background()
			keys := make([]string, 1000)
			for i := range keys {
				keys[i] = "user:alone" + strconv.Itoa(i)
			}
			measureCPU(b, b.N, func() {
				for i := 0; i < b.N; i++ {
					if _, err := s.DecideMode(ctx, keys[i%len(keys)], lim, 1, limiter.ModeConsume, limiter.DefaultTimeout); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// measureCPU runs f, which makes n decisions, and reports our CPU per
// decision.
func measureCPU(b *testing.B, n int, f func()) {
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	f()
	cpu := processCPU() - cpu0
	b.StopTimer()
	b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(n), "cpu-µs/op")
}
