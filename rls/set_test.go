package rls_test

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/rl-exporter/rl-exporter/decision"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/rls"
)

// setConfig has three limits of one call, "narrow" the tightest, and the
// rules whose envoyproxy/ratelimit meaning must hold inside a set.
const setConfig = `
domain: set
descriptors:
  - key: first
    rate_limit: {unit: day, requests_per_unit: 10}
  - key: narrow
    rate_limit: {unit: day, requests_per_unit: 1}
  - key: third
    rate_limit: {unit: day, requests_per_unit: 10}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: day, requests_per_unit: 3}
  - key: free
    rate_limit: {unlimited: true}
  - key: blocked
    rate_limit: {unit: day, requests_per_unit: 0}
  - key: quota
    value: small
    quota_mode: true
    rate_limit: {unit: day, requests_per_unit: 1}
  - key: quota
    value: large
    quota_mode: true
    rate_limit: {unit: day, requests_per_unit: 3}
  - key: quota
    value: shadowed
    quota_mode: true
    shadow_mode: true
    rate_limit: {unit: day, requests_per_unit: 1}
`

func allOrNothing(c *rls.Config) { c.AllOrNothing = true }

// remaining is the limit_remaining of one more call on the descriptor kv alone, which it takes.
func (h *harness) remaining(t *testing.T, kv ...string) uint32 {
	t.Helper()
	return h.call(t, "set", 0, desc(kv...)).Statuses[0].LimitRemaining
}

// threeWithTheSecondOver calls first, narrow, third twice: narrow admits the first call alone.
func threeWithTheSecondOver(t *testing.T, h *harness) *rlsv3.RateLimitResponse {
	t.Helper()
	if resp := h.call(t, "set", 0, desc("first", "a"), desc("narrow", "a"), desc("third", "a")); resp.OverallCode != ok {
		t.Fatalf("first call: %v, want OK", resp)
	}
	return h.call(t, "set", 0, desc("first", "a"), desc("narrow", "a"), desc("third", "a"))
}

func TestRlsOneDescriptorOverItsLimitLeavesTheOthersCountedByDefaultAsEnvoysRateLimitDoes(t *testing.T) {
	for _, b := range []func(*testing.T) backend{func(*testing.T) backend { return memoryBackend() }, redisBackend} {
		be := b(t)
		t.Run(be.name, func(t *testing.T) {
			h := start(t, be.open(t), writeDir(t, map[string]string{"set.yaml": setConfig}), nil)
			resp := threeWithTheSecondOver(t, h)
			if resp.OverallCode != over || !slices.Equal(codes(resp), []rlsv3.RateLimitResponse_Code{ok, over, ok}) {
				t.Fatalf("second call: %v, want OVER_LIMIT of narrow alone", resp)
			}
			// Each of the two calls took one from first and third: the third call is their 3rd.
			if r := h.remaining(t, "first", "a"); r != 7 {
				t.Errorf("first's remaining after a third call: %d, want 7 (the refused call counted)", r)
			}
			if r := h.remaining(t, "third", "a"); r != 7 {
				t.Errorf("third's remaining after a third call: %d, want 7 (the refused call counted)", r)
			}
		})
	}
}

func TestRlsAllOrNothingARefusedCallTakesFromNoDescriptor(t *testing.T) {
	for _, b := range []func(*testing.T) backend{func(*testing.T) backend { return memoryBackend() }, redisBackend} {
		be := b(t)
		t.Run(be.name, func(t *testing.T) {
			h := start(t, be.open(t), writeDir(t, map[string]string{"set.yaml": setConfig}), allOrNothing)
			resp := threeWithTheSecondOver(t, h)
			if resp.OverallCode != over || !slices.Equal(codes(resp), []rlsv3.RateLimitResponse_Code{ok, over, ok}) {
				t.Fatalf("second call: %v, want OVER_LIMIT of narrow alone", resp)
			}
			// The statuses stay per descriptor: first and third would admit, as they stand.
			if r := resp.Statuses[0].LimitRemaining; r != 9 {
				t.Errorf("first's limit_remaining in the refused call: %d, want 9 (nothing taken)", r)
			}
			if d := resp.Statuses[1].DurationUntilReset; d == nil || d.AsDuration() <= 0 {
				t.Errorf("narrow's duration_until_reset %v, want > 0", d)
			}
			if r := h.remaining(t, "first", "a"); r != 8 {
				t.Errorf("first's remaining after a third call: %d, want 8 (the refused call took nothing)", r)
			}
			if r := h.remaining(t, "third", "a"); r != 8 {
				t.Errorf("third's remaining after a third call: %d, want 8 (the refused call took nothing)", r)
			}
			if n := h.count(t, "set.first", "free", "allowed"); n != 2 {
				t.Errorf("first counted allowed %v times, want 2: the refused call's answer is no admission", n)
			}
		})
	}
}

func TestRlsAllOrNothingKeepsEachRulesMeaning(t *testing.T) {
	h := start(t, limiter.NewMemoryStore(limiter.MemoryConfig{}), writeDir(t, map[string]string{"set.yaml": setConfig}), allOrNothing)

	// Unmatched and unlimited descriptors are OK and no part of the set.
	resp := h.call(t, "set", 0, desc("first", "u"), desc("nothing", "x"), desc("free", "x"))
	if resp.OverallCode != ok || resp.Statuses[2].LimitRemaining != math.MaxUint32 {
		t.Fatalf("unmatched and unlimited beside a limit: %v, want OK, unlimited remaining MaxUint32", resp)
	}

	// A shadow rule's refusal refuses nothing, and the others are taken.
	for range 4 {
		h.call(t, "set", 0, desc("shadow", "s"))
	}
	resp = h.call(t, "set", 0, desc("first", "s"), desc("shadow", "s"))
	if resp.OverallCode != ok || !slices.Equal(codes(resp), []rlsv3.RateLimitResponse_Code{ok, ok}) {
		t.Fatalf("a shadow rule over its limit: %v, want OK", resp)
	}
	if r := h.remaining(t, "first", "s"); r != 8 {
		t.Errorf("first beside an over shadow rule: remaining %d, want 8 (taken)", r)
	}

	// A shadow rule of a refused call is not counted either.
	h.call(t, "set", 0, desc("narrow", "t"))
	h.call(t, "set", 0, desc("shadow", "t"), desc("narrow", "t"))
	if r := h.remaining(t, "shadow", "t"); r != 2 {
		t.Errorf("a shadow rule after a refused call: remaining %d, want 2 (only this call taken)", r)
	}

	// requests_per_unit 0 refuses the call without taking from the others.
	resp = h.call(t, "set", 0, desc("first", "b"), desc("blocked", "b"))
	if resp.OverallCode != over || !slices.Equal(codes(resp), []rlsv3.RateLimitResponse_Code{ok, over}) {
		t.Fatalf("beside a blocked rule: %v, want OVER_LIMIT of it", resp)
	}
	if r := h.remaining(t, "first", "b"); r != 9 {
		t.Errorf("first after a blocked call: remaining %d, want 9", r)
	}

	// hits_addend is each descriptor's own: all taken, or none.
	resp = h.call(t, "set", 0, withHits(desc("first", "h"), 4), withHits(desc("third", "h"), 2))
	if resp.OverallCode != ok || resp.Statuses[0].LimitRemaining != 6 || resp.Statuses[1].LimitRemaining != 8 {
		t.Fatalf("hits 4 and 2: %v, want OK with 6 and 8 remaining", resp)
	}
	resp = h.call(t, "set", 0, withHits(desc("first", "h"), 5), withHits(desc("third", "h"), 9))
	if resp.OverallCode != over || !slices.Equal(codes(resp), []rlsv3.RateLimitResponse_Code{ok, over}) {
		t.Fatalf("hits 5 and 9: %v, want OVER_LIMIT of third", resp)
	}
	if r := h.remaining(t, "first", "h"); r != 5 {
		t.Errorf("first after the refused hits: remaining %d, want 5", r)
	}

	// Two descriptors on one key are one count, taken twice or not at all.
	resp = h.call(t, "set", 0, withHits(desc("first", "k"), 3), withHits(desc("first", "k"), 3))
	if resp.OverallCode != ok {
		t.Fatalf("one key twice: %v, want OK", resp)
	}
	if r := h.remaining(t, "first", "k"); r != 3 {
		t.Errorf("one key twice at 3: remaining %d, want 3", r)
	}
}

// The quota_mode cases are envoyproxy/ratelimit's (test/service/ratelimit_test.go,
// TestServicePerDescriptorQuotaMode and those after it), decided on a real store: the call is
// OVER_LIMIT when a descriptor of no quota_mode is over, or when every quota_mode descriptor is;
// each status stays the descriptor's own.
func TestRlsQuotaModeDescriptorsRefuseOnlyWhenAllAreOver(t *testing.T) {
	for _, mode := range []struct {
		name string
		mod  func(*rls.Config)
	}{{"default", nil}, {"all_or_nothing", allOrNothing}} {
		t.Run(mode.name, func(t *testing.T) {
			h := start(t, limiter.NewMemoryStore(limiter.MemoryConfig{}), writeDir(t, map[string]string{"set.yaml": setConfig}), mode.mod)
			spend := func(kv ...string) {
				for h.call(t, "set", 0, desc(kv...)).Statuses[0].Code == ok {
				}
			}
			spend("quota", "small")
			spend("narrow", "n")
			for _, c := range []struct {
				name  string
				kvs   [][]string
				code  rlsv3.RateLimitResponse_Code
				codes []rlsv3.RateLimitResponse_Code
			}{
				{"regular over, quota under", [][]string{{"narrow", "n"}, {"quota", "large"}}, over, []rlsv3.RateLimitResponse_Code{over, ok}},
				{"regular under, every quota over", [][]string{{"first", "m"}, {"quota", "small"}}, over, []rlsv3.RateLimitResponse_Code{ok, over}},
				{"regular and quota under", [][]string{{"first", "m"}, {"quota", "large"}}, ok, []rlsv3.RateLimitResponse_Code{ok, ok}},
				{"quota only, some over", [][]string{{"quota", "small"}, {"quota", "large"}}, ok, []rlsv3.RateLimitResponse_Code{over, ok}},
				{"a shadow quota over answers OK", [][]string{{"quota", "small"}, {"quota", "shadowed"}, {"quota", "shadowed"}}, ok, []rlsv3.RateLimitResponse_Code{over, ok, ok}},
			} {
				resp := h.call(t, "set", 0, descsOf(c.kvs)...)
				if resp.OverallCode != c.code || !slices.Equal(codes(resp), c.codes) {
					t.Errorf("%s: %v, want %v with %v", c.name, resp, c.code, c.codes)
				}
			}
			spend("quota", "large")
			resp := h.call(t, "set", 0, desc("quota", "small"), desc("quota", "large"))
			if resp.OverallCode != over || !slices.Equal(codes(resp), []rlsv3.RateLimitResponse_Code{over, over}) {
				t.Errorf("quota only, all over: %v, want OVER_LIMIT", resp)
			}
		})
	}
}

func TestRlsAllOrNothingTakesFromTheQuotasThatAdmitWhenTheCallPasses(t *testing.T) {
	h := start(t, limiter.NewMemoryStore(limiter.MemoryConfig{}), writeDir(t, map[string]string{"set.yaml": setConfig}), allOrNothing)
	h.call(t, "set", 0, desc("quota", "small"))
	resp := h.call(t, "set", 0, desc("first", "q"), desc("quota", "small"), desc("quota", "large"))
	if resp.OverallCode != ok || !slices.Equal(codes(resp), []rlsv3.RateLimitResponse_Code{ok, over, ok}) {
		t.Fatalf("one quota over, one under: %v, want OK", resp)
	}
	if r := resp.Statuses[2].LimitRemaining; r != 2 {
		t.Errorf("large quota's remaining %d, want 2 (taken)", r)
	}
	// Every quota over: the call is refused and first is not taken.
	h.call(t, "set", 0, desc("quota", "large"))
	h.call(t, "set", 0, desc("quota", "large"))
	resp = h.call(t, "set", 0, desc("first", "q"), desc("quota", "small"), desc("quota", "large"))
	if resp.OverallCode != over {
		t.Fatalf("every quota over: %v, want OVER_LIMIT", resp)
	}
	if r := h.remaining(t, "first", "q"); r != 8 {
		t.Errorf("first after the quota refusal: remaining %d, want 8", r)
	}
}

func TestRlsAllOrNothingNeedsAStoreThatDecidesSets(t *testing.T) {
	st := noSets{limiter.NewMemoryStore(limiter.MemoryConfig{})}
	if _, err := rls.New(rls.Config{Engine: limiter.Config{Store: st}, AllOrNothing: true}, nil); err == nil {
		t.Fatal("all_or_nothing on a store that decides no sets: no error")
	}
	if _, err := rls.New(rls.Config{Engine: limiter.Config{Store: st}}, nil); err != nil {
		t.Fatalf("the default mode on that store: %v", err)
	}
}

// noSets hides its store's DecideSet.
type noSets struct{ limiter.Store }

func descsOf(kvs [][]string) []*ratelimitv3.RateLimitDescriptor {
	out := make([]*ratelimitv3.RateLimitDescriptor, len(kvs))
	for i, kv := range kvs {
		out[i] = desc(kv...)
	}
	return out
}

// setLiveConfig has two limits a call decides as one, wide and narrow.
const setLiveConfig = `
domain: set
descriptors:
  - key: wide
    rate_limit: {unit: day, requests_per_unit: 100}
  - key: narrow
    rate_limit: {unit: day, requests_per_unit: 2}
`

// An all_or_nothing call is decided on the limits in force, however often a call of the same
// rules was decided before: after a live change of one of its limits, after the change is
// removed, and after each reload of the rules, narrow's first call on a user leaves the limit
// now in force less one, and a call it refuses takes nothing from wide.
func TestRlsAllOrNothingDecidesOnTheLimitsInForceAfterALiveChangeOrAReload(t *testing.T) {
	h := start(t, limiter.NewMemoryStore(limiter.MemoryConfig{}), writeDir(t, map[string]string{"set.yaml": setLiveConfig}), allOrNothing)
	call := func(when, user string, want rlsv3.RateLimitResponse_Code, limit, remaining uint32) {
		t.Helper()
		resp := h.call(t, "set", 0, desc("wide", user), desc("narrow", user))
		st := resp.Statuses[1]
		if got := st.CurrentLimit.GetRequestsPerUnit(); resp.OverallCode != want || got != limit || st.LimitRemaining != remaining {
			t.Fatalf("%s: %v, narrow's limit %d, %d remaining; want %v, limit %d, %d remaining",
				when, resp.OverallCode, got, st.LimitRemaining, want, limit, remaining)
		}
	}
	call("first call", "a", ok, 2, 1)
	call("second call", "a", ok, 2, 0)
	call("third call", "a", over, 2, 0)

	five := limiter.Limit{Algorithm: limiter.FixedWindow, Rate: 5, Period: 24 * time.Hour, AlignWindows: true}
	if err := h.svc.SetLive(map[string]map[string]decision.LiveLimit{"set.narrow": {"free": {Limit: five, RolloutPercent: 100}}}); err != nil {
		t.Fatal(err)
	}
	call("under the live change to 5", "b", ok, 5, 4)
	if err := h.svc.SetLive(nil); err != nil {
		t.Fatal(err)
	}
	call("once the live change is removed", "c", ok, 2, 1)

	reload := func(rate string) {
		t.Helper()
		rules, err := rls.LoadDir(writeDir(t, map[string]string{"set.yaml": strings.Replace(setLiveConfig, "requests_per_unit: 2}", "requests_per_unit: "+rate+"}", 1)}))
		if err != nil {
			t.Fatal(err)
		}
		if err := h.svc.Swap(rules); err != nil {
			t.Fatal(err)
		}
	}
	reload("50")
	call("reloaded with narrow at 50", "d", ok, 50, 49)
	reload("1")
	call("reloaded with narrow at 1", "e", ok, 1, 0)
	call("reloaded with narrow at 1, again", "e", over, 1, 0)
	if r := h.remaining(t, "wide", "e"); r != 98 {
		t.Errorf("wide of e: remaining %d, want 98 (the admitted call and this one; the refused took nothing)", r)
	}
}
