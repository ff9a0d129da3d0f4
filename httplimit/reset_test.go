package httplimit

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/rl-exporter/rl-exporter/limiter"
)

func TestADryRunAnswersLikeACheckTakesNothingAndIsNotRecorded(t *testing.T) {
	clk := newClock()
	m, _, rec := setup(t, PolicyConfig{
		Classes: []Class{{Name: "default", Limits: map[string]limiter.Limit{"default": limiter.PerMinute(limiter.TokenBucket, 3)}}},
	}, clk)
	h := m.CheckHandler()
	const dry = `{"key":"alice","endpoint":"GET /a","cost":2,"dry_run":true}`
	for i := 0; i < 4; i++ {
		w := postCheck(h, "", dry)
		var r CheckResponse
		if err := json.Unmarshal(w.Body.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		if w.Code != 200 || !r.Allowed || !r.DryRun || r.Remaining != 3 || w.Header().Get("X-RateLimit-Remaining") != "3" {
			t.Fatalf("dry run %d: %d %s, want 200, allowed, dry_run and 3 remaining (nothing taken)", i+1, w.Code, w.Body)
		}
	}
	if n := len(rec.all()); n != 0 {
		t.Fatalf("dry runs recorded %d decisions, want none", n)
	}
	if w := postCheck(h, "", `{"key":"alice","endpoint":"GET /a","cost":2}`); w.Code != 200 || w.Header().Get("X-RateLimit-Remaining") != "1" {
		t.Fatalf("a real check of cost 2 after the dry runs: %d %s, want 200 with 1 remaining", w.Code, w.Body)
	}
	w := postCheck(h, "", dry)
	var r CheckResponse
	if err := json.Unmarshal(w.Body.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	if w.Code != 429 || r.Allowed || !r.DryRun || r.Remaining != 1 || r.RetryAfter < 1 || w.Header().Get("Retry-After") == "" {
		t.Fatalf("dry run of cost 2 with 1 left: %d %s, want 429 with 1 remaining and a Retry-After", w.Code, w.Body)
	}
	if w := postCheck(h, "", `{"key":"alice","endpoint":"GET /a"}`); w.Code != 200 {
		t.Fatalf("a real check of cost 1 after the refused dry run: %d %s, want 200", w.Code, w.Body)
	}
}

func TestResetClientForgetsEveryBudgetOfTheClientAndNoOneElses(t *testing.T) {
	clk := newClock()
	fixed := limiter.PerMinute(limiter.FixedWindow, 2)
	m, _, _ := setup(t, PolicyConfig{
		Tiers: []string{"free", "pro"}, DefaultTier: "free",
		Classes: []Class{
			{Name: "default", Limits: map[string]limiter.Limit{"free": fixed}},
			{Name: "orders", Routes: []string{"GET /orders/{id}", "POST /orders"}, Limits: map[string]limiter.Limit{"free": fixed}},
			{Name: "search", Routes: []string{"GET /search", "GET /suggest"}, Shared: true, Limits: map[string]limiter.Limit{"free": fixed, "pro": limiter.PerMinute(limiter.GCRA, 2)}},
		},
	}, clk)
	h := m.CheckHandler()
	spend := func(key, ep, tier string) {
		for i := 0; i < 2; i++ {
			postCheck(h, "", `{"key":"`+key+`","endpoint":"`+ep+`","plan_tier":"`+tier+`"}`)
		}
	}
	code := func(key, ep, tier string) int {
		return postCheck(h, "", `{"key":"`+key+`","endpoint":"`+ep+`","plan_tier":"`+tier+`","dry_run":true}`).Code
	}
	eps := []string{"GET /x", "GET /orders/1", "POST /orders", "GET /search"}
	for _, key := range []string{"alice", "bob"} {
		for _, ep := range eps {
			spend(key, ep, "free")
			spend(key, ep, "pro")
		}
	}
	got, err := m.ResetClient(context.Background(), "alice", "")
	if err != nil {
		t.Fatal(err)
	}
	// default: 1 route, orders: 2 routes, search: 1 shared budget; × 2 tiers.
	if len(got) != 8 {
		t.Fatalf("ResetClient listed %d budgets, want 8: %+v", len(got), got)
	}
	if s := got[len(got)-1]; s.Class != "search" || s.PlanTier != "pro" || s.Endpoint != "*" || s.Algorithm != limiter.GCRA {
		t.Fatalf("last budget %+v, want search's shared pro budget on gcra", s)
	}
	for _, ep := range eps {
		for _, tier := range []string{"free", "pro"} {
			if c := code("alice", ep, tier); c != 200 {
				t.Errorf("alice %s on %s after the reset: %d, want 200", ep, tier, c)
			}
			if c := code("bob", ep, tier); c != 429 {
				t.Errorf("bob %s on %s after alice's reset: %d, want 429 (untouched)", ep, tier, c)
			}
		}
	}
	spend("alice", "GET /search", "free")
	spend("alice", "GET /x", "free")
	if got, err := m.ResetClient(context.Background(), "alice", "search"); err != nil || len(got) != 2 {
		t.Fatalf("ResetClient of class search: %+v, %v; want its 2 budgets", got, err)
	}
	if c := code("alice", "GET /suggest", "free"); c != 200 {
		t.Errorf("alice's search budget after a reset of class search: %d, want 200", c)
	}
	if c := code("alice", "GET /x", "free"); c != 429 {
		t.Errorf("alice's default budget after a reset of class search: %d, want 429 (untouched)", c)
	}
	if _, err := m.ResetClient(context.Background(), "alice", "nope"); !errors.Is(err, ErrUnknownClass) {
		t.Fatalf("ResetClient of an unknown class: %v, want ErrUnknownClass", err)
	}
}
