package httplimit

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/decision"
	"github.com/rl-exporter/rl-exporter/limiter"
)

// livePolicy is one class limited to 1 per minute per user, with a live
// change to 2 per minute for tier "default" covering percent of users.
func livePolicy(t *testing.T, percent int, shadow bool) http.Handler {
	t.Helper()
	c := oneClass("api", limiter.PerMinute(limiter.FixedWindow, 1))
	c.Live = map[string]decision.LiveLimit{"default": {
		Limit: limiter.PerMinute(limiter.FixedWindow, 2), RolloutPercent: percent, Shadow: shadow, Source: "rl:config:default",
	}}
	_, h, _ := setup(t, PolicyConfig{Classes: []Class{c}, Identity: IdentityConfig{UserHeader: "X-User-ID", TrustedHeaderPeers: testGateway}}, newClock())
	return h
}

// newLimitUsers returns the users whose second request of the minute
// passes, that is, the users the live change covers.
func newLimitUsers(t *testing.T, h http.Handler, n int) map[string]bool {
	t.Helper()
	got := map[string]bool{}
	for i := 0; i < n; i++ {
		u := fmt.Sprintf("u%d", i)
		hdr := map[string]string{"X-User-ID": u}
		if w := do(h, "GET", "/x", "192.0.2.1:1", hdr); w.Code != 200 {
			t.Fatalf("first request of %s: %d", u, w.Code)
		}
		if do(h, "GET", "/x", "192.0.2.1:1", hdr).Code == 200 {
			got[u] = true
		}
	}
	return got
}

func TestAStagedRolloutAt25PercentCoversAQuarterOfTheKeysAndAlwaysTheSameOnes(t *testing.T) {
	const n = 10_000
	// Binomial(10000, 0.25) has a standard deviation of 43 keys; ±200
	// (2 percentage points) is over 4.5 of them.
	const tolerance = 200
	first := newLimitUsers(t, livePolicy(t, 25, false), n)
	if got := len(first); got < n/4-tolerance || got > n/4+tolerance {
		t.Fatalf("%d of %d keys got the new limit at 25 %%, want %d ± %d", got, n, n/4, tolerance)
	}
	// Another instance (a new policy on its own store) covers the same keys.
	again := newLimitUsers(t, livePolicy(t, 25, false), n)
	if len(again) != len(first) {
		t.Fatalf("second instance covers %d keys, first %d", len(again), len(first))
	}
	for u := range first {
		if !again[u] {
			t.Fatalf("%s is covered on one instance and not on the other", u)
		}
	}
	// Raising to 50 % keeps every key already covered.
	half := newLimitUsers(t, livePolicy(t, 50, false), n)
	if got := len(half); got < n/2-tolerance || got > n/2+tolerance {
		t.Errorf("%d keys at 50 %%, want %d ± %d", got, n/2, tolerance)
	}
	for u := range first {
		if !half[u] {
			t.Fatalf("%s was covered at 25 %% and not at 50 %%", u)
		}
	}
	// 0 % is a rollback: nobody; 100 %: everybody.
	if got := len(newLimitUsers(t, livePolicy(t, 0, false), 500)); got != 0 {
		t.Errorf("%d keys covered at 0 %%", got)
	}
	if got := len(newLimitUsers(t, livePolicy(t, 100, false), 500)); got != 500 {
		t.Errorf("%d of 500 keys covered at 100 %%", got)
	}
}

func TestALiveChangeInShadowKeepsTheConfiguredLimitAndCountsWhatItWouldRefuse(t *testing.T) {
	// Configured: 3 per minute. Live change in shadow: 1 per minute.
	c := oneClass("api", limiter.PerMinute(limiter.FixedWindow, 3))
	c.Live = map[string]decision.LiveLimit{"default": {Limit: limiter.PerMinute(limiter.FixedWindow, 1), RolloutPercent: 100, Shadow: true, Source: "rl:config:default"}}
	m, h, rec := setup(t, PolicyConfig{Classes: []Class{c}}, newClock())
	var codes []int
	for i := 0; i < 4; i++ {
		w := do(h, "GET", "/x", "192.0.2.1:1", nil)
		codes = append(codes, w.Code)
		if w.Code == 200 && w.Header().Get("X-RateLimit-Limit") != "3" {
			t.Errorf("request %d: X-RateLimit-Limit %q, want the enforced 3", i+1, w.Header().Get("X-RateLimit-Limit"))
		}
	}
	if fmt.Sprint(codes) != "[200 200 200 429]" {
		t.Errorf("codes %v: the configured 3 per minute must still be enforced", codes)
	}
	var statuses []limiter.Status
	for _, r := range rec.all() {
		statuses = append(statuses, r.Status)
	}
	if fmt.Sprint(statuses) != "[allowed shadow_rejected shadow_rejected rejected]" {
		t.Errorf("statuses %v, want the 2nd and 3rd counted as shadow_rejected", statuses)
	}
	for _, l := range m.Policy().Limits() {
		if l.Limit.Rate != 3 || !l.LiveShadow || l.Source != "rl:config:default" {
			t.Errorf("Limits %+v: want the enforced 3 shown, the shadow change named", l)
		}
	}
}

func TestALiveChangeShowsInLimitsAsSoonAsItIsEnforced(t *testing.T) {
	c := oneClass("api", limiter.PerMinute(limiter.FixedWindow, 3))
	c.Live = map[string]decision.LiveLimit{"default": {Limit: limiter.PerMinute(limiter.FixedWindow, 7), RolloutPercent: 10, Source: "rl:config:api:default"}}
	m, _, _ := setup(t, PolicyConfig{Classes: []Class{c}}, newClock())
	l := m.Policy().Limits()[0]
	if l.Limit.Rate != 7 || l.Configured.Rate != 3 || l.RolloutPercent != 10 || l.Source != "rl:config:api:default" {
		t.Errorf("Limits()[0] = %+v", l)
	}
}

func TestAClassCostTakesThatManyUnitsPerRequest(t *testing.T) {
	c := oneClass("bulk", limiter.PerMinute(limiter.FixedWindow, 10))
	c.Cost = 4
	_, h, _ := setup(t, PolicyConfig{Classes: []Class{c}}, newClock())
	var remaining []string
	for i := 0; i < 3; i++ {
		w := do(h, "GET", "/x", "192.0.2.1:1", nil)
		remaining = append(remaining, fmt.Sprint(w.Code, "/", w.Header().Get("X-RateLimit-Remaining")))
	}
	if fmt.Sprint(remaining) != "[200/6 200/2 429/2]" {
		t.Errorf("code/remaining %v, want 4 units per request", remaining)
	}
}

func TestALiveLimitForAnUnknownTierOrRolloutIsRefused(t *testing.T) {
	for name, lv := range map[string]map[string]decision.LiveLimit{
		"an unknown tier":       {"gold": {Limit: limiter.PerMinute(limiter.GCRA, 5), RolloutPercent: 100}},
		"a rollout above 100 %": {"default": {Limit: limiter.PerMinute(limiter.GCRA, 5), RolloutPercent: 101}},
		"an invalid limit":      {"default": {Limit: limiter.Limit{Algorithm: limiter.GCRA, Rate: 5, Period: -time.Second}, RolloutPercent: 100}},
	} {
		c := oneClass("api", limiter.PerMinute(limiter.FixedWindow, 3))
		c.Live = lv
		if _, err := NewPolicy(PolicyConfig{Classes: []Class{c}, Store: limiter.NewMemoryStore(limiter.MemoryConfig{})}); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
