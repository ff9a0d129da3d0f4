package rls

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// Calls carrying limits of their own keep no Set: an override's limiter is compiled anew once
// the overrides' LRU drops it (at once on a long path), so kept combinations of them would fill
// the cache for good and send the rules' own combinations back to a Set built per call.
func TestAllOrNothingCallsCarryingLimitsKeepNoSet(t *testing.T) {
	dir := t.TempDir()
	rulesYAML := "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: day, requests_per_unit: 1000}\n" +
		"  - key: b\n    rate_limit: {unit: day, requests_per_unit: 1000}\n"
	if err := os.WriteFile(filepath.Join(dir, "d.yaml"), []byte(rulesYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	rules, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Engine: limiter.Config{Store: limiter.NewMemoryStore(limiter.MemoryConfig{})}, AllOrNothing: true}, rules)
	if err != nil {
		t.Fatal(err)
	}
	entry := func(k, v string) *commonv3.RateLimitDescriptor_Entry {
		return &commonv3.RateLimitDescriptor_Entry{Key: k, Value: v}
	}
	call := func(perUnit uint32) {
		t.Helper()
		b := &commonv3.RateLimitDescriptor{Entries: []*commonv3.RateLimitDescriptor_Entry{entry("b", "1")}}
		if perUnit > 0 {
			b.Limit = &commonv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: perUnit, Unit: typev3.RateLimitUnit_DAY}
		}
		req := &rlsv3.RateLimitRequest{Domain: "d", Descriptors: []*commonv3.RateLimitDescriptor{
			{Entries: []*commonv3.RateLimitDescriptor_Entry{entry("a", "1")}}, b}}
		if resp, err := s.ShouldRateLimit(context.Background(), req); err != nil || resp.OverallCode != rlsv3.RateLimitResponse_OK {
			t.Fatalf("override %d: %v %v", perUnit, resp, err)
		}
	}
	kept := func() int {
		if m := s.current.Load().sets.sets.Load(); m != nil {
			return len(*m)
		}
		return 0
	}
	for i := range 50 {
		call(uint32(1000 + i)) // each a limit of its own: a limiter compiled for it
	}
	if n := kept(); n != 0 {
		t.Errorf("%d Sets kept after 50 calls carrying limits of their own, want none", n)
	}
	call(0)
	call(0)
	if n := kept(); n != 1 {
		t.Errorf("%d Sets kept after the rules' own combination twice, want 1", n)
	}
}
