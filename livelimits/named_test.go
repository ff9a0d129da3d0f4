package livelimits

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

func TestAChangeOfOneOfSeveralLimitsIsAddressedByNameAndNoTierWideHashReachesIt(t *testing.T) {
	ts := []Target{
		{Class: "chat", Tier: "pro", Name: "rpm", Limit: limiter.PerMinute(limiter.SlidingWindow, 500), Cost: 1},
		{Class: "chat", Tier: "pro", Name: "tpm", Limit: limiter.PerMinute(limiter.TokenBucket, 200000), Cost: 1},
		{Class: "search", Tier: "pro", Limit: limiter.PerMinute(limiter.FixedWindow, 50), Cost: 1},
	}
	mem := &Memory{}
	c, err := New(Config{Backend: mem, Targets: ts})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	write := func(key string, ch Change) {
		t.Helper()
		if err := mem.Write(ctx, key, ch.Fields(), time.Time{}); err != nil {
			t.Fatal(err)
		}
		if err := c.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
	}
	write(LimitKey("rl", "chat", "pro", "rpm"), Change{MaxRequests: 100, RolloutPercent: 100})
	write(TierKey("rl", "pro"), Change{MaxRequests: 7, RolloutPercent: 100})
	ov := c.Overlay()
	if got := ov["chat"]["pro:rpm"]; got.Limit.Rate != 100 || got.Limit.Period != time.Minute || got.Source != "rl:config:chat:pro:rpm" {
		t.Errorf("chat pro:rpm %+v: want 100 a minute from its own hash", got)
	}
	if got, ok := ov["chat"]["pro:tpm"]; ok {
		t.Errorf("chat pro:tpm %+v: the tier-wide hash reached one of several limits", got)
	}
	if got := ov["search"]["pro"]; got.Limit.Rate != 7 {
		t.Errorf("search pro %+v: want the tier-wide 7", got)
	}
	if got, ok := ov["chat"]["pro"]; ok {
		t.Errorf("chat pro %+v: a tier of several limits has no change of its own", got)
	}
	if err := c.Check(ClassKey("rl", "chat", "pro"), Change{MaxRequests: 1, RolloutPercent: 100}); err == nil {
		t.Error("a change of the tier of several limits as a whole was accepted")
	}
	err = c.Check(LimitKey("rl", "chat", "pro", "tpm"), Change{Algorithm: "bogus", RolloutPercent: 100})
	if err == nil || !strings.Contains(err.Error(), "limit tpm") {
		t.Errorf("an invalid change of tpm: %v, want an error naming the limit", err)
	}
	var names []string
	for _, e := range c.Entries() {
		names = append(names, e.Class+"/"+e.Tier+"/"+e.Name)
	}
	if strings.Join(names, " ") != "chat/pro/rpm /pro/" {
		t.Errorf("entries %v", names)
	}
}
