package rls_test

import (
	"math"
	"slices"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"

	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/rls"
)

const (
	ok   = rlsv3.RateLimitResponse_OK
	over = rlsv3.RateLimitResponse_OVER_LIMIT
)

// suiteConfig is the domain the suite runs against. Daily windows keep the
// counts from resetting while a test runs.
const suiteConfig = `
domain: suite
descriptors:
  - key: fixed
    rate_limit: {unit: day, requests_per_unit: 3, name: fixed_daily}
  - key: client
    rate_limit: {unit: day, requests_per_unit: 2}
  - key: client
    value: vip
    rate_limit: {unit: day, requests_per_unit: 5}
  - key: client
    value: internal
    rate_limit: {unlimited: true}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: day, requests_per_unit: 1}
  - key: cost
    rate_limit: {unit: day, requests_per_unit: 5}
  - key: bucket
    rate_limit: {unit: hour, requests_per_unit: 60, algorithm: token_bucket, burst: 4}
  - key: plan
    descriptors:
      - key: user
        rate_limit: {unit: day, requests_per_unit: 1}
`

// TestService runs the suite on the memory store, on a private Redis and
// on a private Redis Cluster.
func TestService(t *testing.T) {
	backends := []func(*testing.T) backend{
		func(*testing.T) backend { return memoryBackend() },
		redisBackend,
		clusterBackend,
	}
	for _, mk := range backends {
		b := mk(t)
		t.Run(b.name, func(t *testing.T) { runSuite(t, b) })
	}
}

func runSuite(t *testing.T, b backend) {
	dir := writeDir(t, map[string]string{"suite.yaml": suiteConfig})
	t.Run("a fixed window admits exactly requests_per_unit, then answers OVER_LIMIT", func(t *testing.T) {
		h := start(t, b.open(t), dir, nil)
		for i := range 3 {
			resp := h.call(t, "suite", 0, desc("fixed", "a"))
			st := resp.Statuses[0]
			if resp.OverallCode != ok || st.Code != ok {
				t.Fatalf("call %d: %v, want OK", i+1, resp)
			}
			if st.LimitRemaining != uint32(2-i) {
				t.Errorf("call %d: limit_remaining %d, want %d", i+1, st.LimitRemaining, 2-i)
			}
			cl := st.CurrentLimit
			if cl.GetRequestsPerUnit() != 3 || cl.GetUnit() != rlsv3.RateLimitResponse_RateLimit_DAY || cl.GetName() != "fixed_daily" {
				t.Errorf("current_limit %v, want 3 per DAY named fixed_daily", cl)
			}
			if d := st.DurationUntilReset.AsDuration(); d <= 0 || d > 24*time.Hour {
				t.Errorf("duration_until_reset %s, want in (0, 24h]", d)
			}
		}
		resp := h.call(t, "suite", 0, desc("fixed", "a"))
		if resp.OverallCode != over || resp.Statuses[0].Code != over || resp.Statuses[0].LimitRemaining != 0 {
			t.Fatalf("4th call: %v, want OVER_LIMIT with nothing remaining", resp)
		}
		if got := h.call(t, "suite", 0, desc("fixed", "b")); got.OverallCode != ok {
			t.Errorf("another value of the key has its own count, got %v", got)
		}
		if a, r := h.count(t, "suite.fixed", "free", "allowed"), h.count(t, "suite.fixed", "free", "rejected"); a != 4 || r != 1 {
			t.Errorf("counted allowed %v rejected %v on endpoint suite.fixed, want 4 and 1", a, r)
		}
	})
	t.Run("a value-specific descriptor overrides the key's default", func(t *testing.T) {
		h := start(t, b.open(t), dir, nil)
		if n := admitted(t, h, "suite", desc("client", "vip"), 10); n != 5 {
			t.Errorf("client=vip admitted %d, want its own limit 5", n)
		}
		if n := admitted(t, h, "suite", desc("client", "bob"), 10); n != 2 {
			t.Errorf("client=bob admitted %d, want the key default 2", n)
		}
	})
	t.Run("an unlimited descriptor never limits", func(t *testing.T) {
		h := start(t, b.open(t), dir, nil)
		for range 20 {
			resp := h.call(t, "suite", 0, desc("client", "internal"))
			if resp.OverallCode != ok || resp.Statuses[0].CurrentLimit != nil || resp.Statuses[0].LimitRemaining != math.MaxUint32 {
				t.Fatalf("%v, want OK without a limit and MaxUint32 remaining", resp)
			}
		}
	})
	t.Run("shadow_mode answers OK but counts shadow_rejected", func(t *testing.T) {
		h := start(t, b.open(t), dir, nil)
		for range 3 {
			if resp := h.call(t, "suite", 0, desc("shadow", "x")); resp.OverallCode != ok {
				t.Fatalf("%v, want OK", resp)
			}
		}
		if a, s := h.count(t, "suite.shadow", "free", "allowed"), h.count(t, "suite.shadow", "free", "shadow_rejected"); a != 1 || s != 2 {
			t.Errorf("counted allowed %v shadow_rejected %v, want 1 and 2", a, s)
		}
	})
	t.Run("hits_addend is the cost: the descriptor's own, else the request's; 0 on the request means 1, on the descriptor a peek", func(t *testing.T) {
		h := start(t, b.open(t), dir, nil)
		if st := h.call(t, "suite", 2, desc("cost", "a")).Statuses[0]; st.Code != ok || st.LimitRemaining != 3 {
			t.Fatalf("request hits_addend 2: %v, want OK with 3 remaining", st)
		}
		if st := h.call(t, "suite", 2, withHits(desc("cost", "a"), 3)).Statuses[0]; st.Code != ok || st.LimitRemaining != 0 {
			t.Fatalf("descriptor hits_addend 3 beside request's 2: %v, want OK with 0 remaining", st)
		}
		if st := h.call(t, "suite", 0, desc("cost", "a")).Statuses[0]; st.Code != over {
			t.Fatalf("next request: %v, want OVER_LIMIT", st)
		}
		for range 2 {
			if st := h.call(t, "suite", 0, withHits(desc("cost", "b"), 0)).Statuses[0]; st.Code != ok || st.LimitRemaining != 5 {
				t.Fatalf("descriptor hits_addend 0: %v, want OK taking nothing (5 remaining)", st)
			}
		}
		if st := h.call(t, "suite", 0, desc("cost", "b")).Statuses[0]; st.Code != ok || st.LimitRemaining != 4 {
			t.Fatalf("request hits_addend 0 after the peeks: %v, want a cost of 1 (4 remaining)", st)
		}
		if st := h.call(t, "suite", 0, withHits(desc("cost", "a"), 0)).Statuses[0]; st.Code != over {
			t.Fatalf("a peek at a spent budget: %v, want OVER_LIMIT", st)
		}
		if st := h.call(t, "suite", 6, desc("cost", "c")).Statuses[0]; st.Code != over {
			t.Fatalf("a cost above the limit: %v, want OVER_LIMIT", st)
		}
	})
	t.Run("several descriptors get one status each and the overall code is the worst", func(t *testing.T) {
		h := start(t, b.open(t), dir, nil)
		ds := []string{"fixed", "m", "client", "m2"}
		for i := range 2 {
			resp := h.call(t, "suite", 0, desc(ds[0], ds[1]), desc(ds[2], ds[3]), desc("unknown", "x"))
			if resp.OverallCode != ok || !slices.Equal(codes(resp), []rlsv3.RateLimitResponse_Code{ok, ok, ok}) {
				t.Fatalf("call %d: %v, want all OK", i+1, resp)
			}
			if resp.Statuses[2].CurrentLimit != nil {
				t.Errorf("an unmatched descriptor has no limit, got %v", resp.Statuses[2])
			}
		}
		resp := h.call(t, "suite", 0, desc(ds[0], ds[1]), desc(ds[2], ds[3]), desc("unknown", "x"))
		if resp.OverallCode != over || !slices.Equal(codes(resp), []rlsv3.RateLimitResponse_Code{ok, over, ok}) {
			t.Fatalf("%v, want [OK OVER_LIMIT OK] and OVER_LIMIT overall", resp)
		}
	})
	t.Run("token_bucket with burst admits the burst at once", func(t *testing.T) {
		h := start(t, b.open(t), dir, nil)
		if n := admitted(t, h, "suite", desc("bucket", "a"), 8); n != 4 {
			t.Errorf("admitted %d, want the burst 4", n)
		}
	})
	t.Run("plan_tier comes from the tier descriptor key when it names a tier", func(t *testing.T) {
		h := start(t, b.open(t), dir, nil)
		h.call(t, "suite", 0, desc("plan", "pro", "user", "u1"))
		h.call(t, "suite", 0, desc("plan", "gold", "user", "u1"))
		if p, f := h.count(t, "suite.plan.user", "pro", "allowed"), h.count(t, "suite.plan.user", "free", "allowed"); p != 1 || f != 1 {
			t.Errorf("counted pro %v free %v, want 1 each (gold is no tier: the default)", p, f)
		}
	})
	t.Run("response headers carry the tightest descriptor's numbers when enabled", func(t *testing.T) {
		h := start(t, b.open(t), dir, nil)
		resp := h.call(t, "suite", 0, desc("fixed", "h"), desc("client", "vip"))
		got := headers(resp)
		if got.Get("X-RateLimit-Limit") != "3" || got.Get("X-RateLimit-Remaining") != "2" || got.Get("RateLimit-Policy") != `"fixed_daily";q=3;w=86400` {
			t.Errorf("headers %v, want the fixed_daily limit (3, 2 remaining)", got)
		}
		if got.Get("RateLimit") == "" {
			t.Errorf("headers %v lack RateLimit", got)
		}
		for range 3 {
			resp = h.call(t, "suite", 0, desc("fixed", "h"))
		}
		if got := headers(resp); got.Get("Retry-After") == "" || got.Get("X-RateLimit-Remaining") != "0" {
			t.Errorf("headers of a refusal %v, want Retry-After and 0 remaining", got)
		}
		off := start(t, b.open(t), dir, func(c *rls.Config) { c.ResponseHeaders = false })
		if got := headers(off.call(t, "suite", 0, desc("fixed", "h"))); len(got) != 0 {
			t.Errorf("headers %v with response headers off, want none", got)
		}
	})
}

// admitted sends n single-descriptor requests and returns how many were OK.
func admitted(t *testing.T, h *harness, domain string, d *ratelimitv3.RateLimitDescriptor, n int) int {
	t.Helper()
	got := 0
	for range n {
		resp := h.call(t, domain, 0, d)
		if resp.OverallCode == ok {
			got++
		}
	}
	return got
}

func TestALimitOverrideInTheRequestWinsOverTheFiles(t *testing.T) {
	dir := writeDir(t, map[string]string{"suite.yaml": suiteConfig})
	h := start(t, limiter.NewMemoryStore(limiter.MemoryConfig{}), dir, nil)
	withLimit := func(perUnit uint32) *ratelimitv3.RateLimitDescriptor {
		d := desc("fixed", "o")
		d.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: perUnit, Unit: typev3.RateLimitUnit_DAY}
		return d
	}
	if n := admitted(t, h, "suite", withLimit(2), 5); n != 2 {
		t.Errorf("admitted %d under an override of 2 a day, want 2", n)
	}
	st := h.call(t, "suite", 0, withLimit(2)).Statuses[0]
	if st.CurrentLimit.GetRequestsPerUnit() != 2 || st.CurrentLimit.GetUnit() != rlsv3.RateLimitResponse_RateLimit_DAY {
		t.Errorf("current_limit %v, want 2 per DAY", st.CurrentLimit)
	}
	if n := admitted(t, h, "suite", desc("fixed", "o"), 5); n != 3 {
		t.Errorf("the same descriptor without the override admitted %d, want the files' 3 on counts of its own", n)
	}
	if resp := h.call(t, "unknown", 0, withLimit(0)); resp.OverallCode != ok {
		t.Errorf("an override in an unknown domain: %v, want OK (not limited)", resp)
	}
}
