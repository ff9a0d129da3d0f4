package main

import "testing"

// BenchmarkMemory compares, in one run, rl-exporter's Limiter on a
// MemoryStore (gcra, token_bucket, fixed_window) with x/time/rate behind a
// mutex-guarded map, over 10,000 existing keys, serially and in parallel,
// on keys every goroutine decides on in turn and on keys of each
// goroutine's own:
//
//	cd bench && go test -run '^$' -bench Memory -benchmem -count 5 ./compare
//
// `go run ./compare --stores memory --gobench 5` runs the same benchmarks
// interleaved and prints the ratios.
func BenchmarkMemory(b *testing.B) {
	benches, err := memoryBenchmarks(10_000)
	if err != nil {
		b.Fatal(err)
	}
	for _, mb := range benches {
		b.Run(mb.name, mb.fn)
	}
}
