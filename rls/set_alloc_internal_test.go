//go:build !race

package rls

import (
	"testing"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// Finding the kept Set of a combination allocates nothing.
func TestAKeptSetIsFoundWithoutAllocating(t *testing.T) {
	lims := newLimiters(t, limiter.NewMemoryStore(limiter.MemoryConfig{}), 3)
	var sc setCache
	if _, err := sc.of(lims); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = sc.of(lims) }); n != 0 {
		t.Errorf("%.1f allocations to find a kept Set, want 0", n)
	}
}
