package rls_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/decision"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/rls"
)

// liveDomain: one rule, 2 a day, on descriptors carrying a plan entry too.
const liveDomain = `
domain: live
descriptors:
  - key: user
    rate_limit: {unit: day, requests_per_unit: 2}
`

func TestALiveChangeAppliesToItsRuleAndTierAndStaysThroughAReloadOfTheRules(t *testing.T) {
	dir := writeDir(t, map[string]string{"live.yaml": liveDomain})
	h := start(t, limiter.NewMemoryStore(limiter.MemoryConfig{}), dir, nil)
	limitOf := func(user, plan string) uint32 {
		t.Helper()
		return h.call(t, "live", 0, desc("user", user), desc("plan", plan)).Statuses[0].CurrentLimit.GetRequestsPerUnit()
	}
	ten := limiter.Limit{Algorithm: limiter.FixedWindow, Rate: 10, Period: time.Hour, AlignWindows: true}
	if err := h.svc.SetLive(map[string]map[string]decision.LiveLimit{
		"live.user": {"pro": {Limit: ten, RolloutPercent: 100, Source: "rl:config:live.user:pro"}},
		"api":       {"pro": {Limit: ten, RolloutPercent: 100}}, // an HTTP class: ignored here
	}); err != nil {
		t.Fatal(err)
	}
	if got := limitOf("a", "pro"); got != 10 {
		t.Errorf("pro descriptor: limit %d, want the live 10", got)
	}
	if got := limitOf("a", "free"); got != 2 {
		t.Errorf("free descriptor: limit %d, want the file's 2", got)
	}
	if l, ok := h.svc.LiveLimit("live.user", "pro"); !ok || l != ten {
		t.Errorf("LiveLimit(live.user, pro) = %v, %v; want the live limit", l, ok)
	}
	rules, err := rls.LoadDir(writeDir(t, map[string]string{"live.yaml": liveDomain}))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.svc.Swap(rules); err != nil {
		t.Fatal(err)
	}
	if got := limitOf("b", "pro"); got != 10 {
		t.Errorf("after Swap: limit %d, want the live 10 still", got)
	}
	if err := h.svc.SetLive(nil); err != nil {
		t.Fatal(err)
	}
	if got := limitOf("c", "pro"); got != 2 {
		t.Errorf("after the change is removed: limit %d, want the file's 2", got)
	}
}

func TestARolloutCoversTheDescriptorsWhoseBucketIsUnderItsPercentage(t *testing.T) {
	dir := writeDir(t, map[string]string{"live.yaml": liveDomain})
	h := start(t, limiter.NewMemoryStore(limiter.MemoryConfig{}), dir, nil)
	ten := limiter.Limit{Algorithm: limiter.FixedWindow, Rate: 10, Period: 24 * time.Hour, AlignWindows: true}
	if err := h.svc.SetLive(map[string]map[string]decision.LiveLimit{"live.user": {"free": {Limit: ten, RolloutPercent: 30}}}); err != nil {
		t.Fatal(err)
	}
	covered := 0
	for i := range 200 {
		user := fmt.Sprint("u", i)
		got := h.call(t, "live", 0, desc("user", user)).Statuses[0].CurrentLimit.GetRequestsPerUnit()
		want := uint32(2)
		if decision.RolloutBucket("rls|live|user="+user) < 30 {
			want = 10
			covered++
		}
		if got != want {
			t.Fatalf("%s: limit %d, want %d", user, got, want)
		}
	}
	if covered < 30 || covered > 90 {
		t.Errorf("%d of 200 descriptors covered by a 30%% rollout", covered)
	}
}

func TestAnInvalidLiveChangeLeavesTheChangesInForce(t *testing.T) {
	dir := writeDir(t, map[string]string{"live.yaml": liveDomain})
	h := start(t, limiter.NewMemoryStore(limiter.MemoryConfig{}), dir, nil)
	good := limiter.Limit{Algorithm: limiter.FixedWindow, Rate: 7, Period: 24 * time.Hour, AlignWindows: true}
	if err := h.svc.SetLive(map[string]map[string]decision.LiveLimit{"live.user": {"free": {Limit: good, RolloutPercent: 100}}}); err != nil {
		t.Fatal(err)
	}
	bad := map[string]map[string]decision.LiveLimit{"live.user": {"free": {Limit: good, RolloutPercent: 101}}}
	if err := h.svc.SetLive(bad); err == nil {
		t.Fatal("SetLive accepted a rollout of 101%")
	}
	if got := h.call(t, "live", 0, desc("user", "z")).Statuses[0].CurrentLimit.GetRequestsPerUnit(); got != 7 {
		t.Errorf("limit %d after a refused change, want the 7 in force", got)
	}
}
