package collector

import (
	"context"
	"fmt"
	"runtime"
	"syscall"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/rl-exporter/rl-exporter/limiter"
)

func benchCollector(b *testing.B) *Collector {
	b.Helper()
	eps := make([]string, 50)
	for i := range eps {
		eps[i] = fmt.Sprintf("/api/v1/resource%d/{id}", i)
	}
	return newTestCollector(b, Config{Endpoints: eps, Tiers: []string{"free", "pro", "enterprise"}, DefaultTier: "free"})
}

// threadCPU returns the CPU time the calling OS thread has used.
func threadCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loop runs f b.N times on one locked OS thread and reports, beside the
// wall time, the CPU time per operation (cpu-ns/op): on a shared machine
// the wall time includes the time other processes held the core.
func loop(b *testing.B, f func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ReportAllocs()
	start := threadCPU(b)
	for b.Loop() {
		f()
	}
	b.ReportMetric(float64(threadCPU(b)-start)/float64(b.N), "cpu-ns/op")
}

func BenchmarkRecordDecision(b *testing.B) {
	ctx := context.Background()
	fail := rec("/api/v1/resource7/{id}", "pro", limiter.StatusFailOpen)
	fail.Err = fmt.Errorf("redis store: %w", context.DeadlineExceeded)
	delayed := rec("/api/v1/resource7/{id}", "pro", limiter.StatusAllowed)
	delayed.Decision.Delay = 20 * time.Millisecond
	cases := []struct {
		name string
		r    limiter.Record
	}{
		{"allowed", rec("/api/v1/resource7/{id}", "pro", limiter.StatusAllowed)},
		{"allowed_leaky_delay", delayed},
		{"rejected_tracked_key", rec("/api/v1/resource7/{id}", "pro", limiter.StatusRejected)},
		{"fail_open_timeout", fail},
		{"unconfigured_endpoint_and_tier", rec("/raw/path/123", "gold", limiter.StatusAllowed)},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			c := benchCollector(b)
			loop(b, func() { c.RecordDecision(ctx, tc.r) })
		})
	}
	b.Run("allowed_parallel", func(b *testing.B) {
		c := benchCollector(b)
		r := rec("/api/v1/resource7/{id}", "pro", limiter.StatusAllowed)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				c.RecordDecision(ctx, r)
			}
		})
	})
}

func BenchmarkObserveStore(b *testing.B) {
	b.Run("no_tracing", func(b *testing.B) {
		c := newTestCollector(b, Config{})
		ctx := context.Background()
		loop(b, func() { c.ObserveStore(ctx, "gcra", 3*time.Millisecond, nil) })
	})
	b.Run("exemplar_sampled_span", func(b *testing.B) {
		c := newTestCollector(b, Config{Exemplars: true})
		tp := sdktrace.NewTracerProvider()
		ctx, span := tp.Tracer("bench").Start(context.Background(), "decision")
		defer span.End()
		loop(b, func() { c.ObserveStore(ctx, "gcra", 3*time.Millisecond, nil) })
	})
}

func BenchmarkScrape(b *testing.B) {
	c := benchCollector(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Registry().Gather(); err != nil {
			b.Fatal(err)
		}
	}
}
