//go:build !race

// Not under the race detector, which makes sync.Pool drop items at random.

package proxy

import "testing"

func TestTheCopyBufferPoolAllocatesNothingOnceWarm(t *testing.T) {
	var p bufferPool
	p.Put(p.Get())
	allocs := testing.AllocsPerRun(100, func() {
		b := p.Get()
		if len(b) != proxyBufferSize {
			t.Fatalf("buffer of %d bytes, want %d", len(b), proxyBufferSize)
		}
		p.Put(b)
	})
	if allocs != 0 {
		t.Errorf("%.1f allocations per Get and Put; want 0", allocs)
	}
}
