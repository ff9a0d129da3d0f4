//go:build !race

package rls_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// liveHeap is the live heap after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// overrideFlood sends rpcs requests of perRPC descriptors, each carrying a
// limit override never seen before, whose entries have keys of keyLen
// bytes; it returns how many requests were refused as invalid.
func overrideFlood(t *testing.T, h *harness, rpcs, perRPC, entries, keyLen int) (refused int) {
	t.Helper()
	n := 0
	for range rpcs {
		req := &rlsv3.RateLimitRequest{Domain: "suite"}
		for range perRPC {
			n++
			d := &ratelimitv3.RateLimitDescriptor{
				Limit: &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: uint32(n), Unit: typev3.RateLimitUnit_DAY},
			}
			for e := range entries {
				key := fmt.Sprintf("%d-%d-", n, e)
				d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: key + strings.Repeat("k", keyLen-len(key)), Value: "v"})
			}
			req.Descriptors = append(req.Descriptors, d)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := h.client.ShouldRateLimit(ctx, req)
		cancel()
		if err != nil {
			refused++
		}
	}
	return refused
}

// TestGoalLimitOverridesDoNotGrowTheHeap floods the service with limit
// overrides of long entry keys, each new, and checks that the live heap
// stays within a bound: first the flood of 20 KB keys, 50 overrides a
// request over 40 requests, then as many overrides within every cap as
// the override cache holds ten times over, of paths too long to be cached
// and of paths short enough.
func TestGoalLimitOverridesDoNotGrowTheHeap(t *testing.T) {
	dir := writeDir(t, map[string]string{"suite.yaml": suiteConfig})
	// Each override is a descriptor of its own, a key of the store: bound
	// the store by its own cap, so that what grows is the service's.
	h := start(t, limiter.NewMemoryStore(limiter.MemoryConfig{MaxKeys: 4096}), dir, nil)
	h.call(t, "suite", 0, desc("fixed", "warm"))
	const bound = 20 << 20
	for _, f := range []struct {
		name                      string
		requests, overrides, keys int
		keyLen                    int
		withinCaps                bool
	}{
		{"20 KB keys", 40, 50, 1, 20 << 10, false},
		{"16 keys of 512 bytes", 10 * 1000 / 32, 32, 16, 512, true},
		// Paths short enough to be cached: 40 times the cache's size.
		{"1 key of 240 bytes", 40 * 1000 / 32, 32, 1, 240, true},
	} {
		before := liveHeap()
		refused := overrideFlood(t, h, f.requests, f.overrides, f.keys, f.keyLen)
		grown := int64(liveHeap()) - int64(before)
		t.Logf("%s, %d requests of %d overrides: %d refused, live heap %+.1f MB", f.name, f.requests, f.overrides, refused, float64(grown)/(1<<20))
		if f.withinCaps && refused != 0 {
			t.Errorf("%s: %d requests within every cap refused, want none", f.name, refused)
		}
		if grown > bound {
			t.Errorf("%s: the live heap grew by %.1f MB, want at most %d MB", f.name, float64(grown)/(1<<20), bound>>20)
		}
	}
}
