package httplimit

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// decideOnly is a store that decides but keeps no reservations (it is no limiter.Reserver), as a
// region mode deciding on a local copy is.
type decideOnly struct{ st *limiter.MemoryStore }

func (d decideOnly) Decide(ctx context.Context, key string, lim limiter.Limit, cost int64) (limiter.Decision, error) {
	return d.st.Decide(ctx, key, lim, cost)
}
func (decideOnly) Name() string { return "decide-only" }

// The caller of "reserve": true reports the cost itself, so any class whose limiter can hold a
// reservation takes one: cost_from is only how the proxy learns a cost.
func TestAReservingCheckWorksOnAClassWithoutCostFrom(t *testing.T) {
	for _, a := range limiter.AllAlgorithms() {
		t.Run(string(a), func(t *testing.T) {
			lim := limiter.Limit{Algorithm: a, Rate: 100, Period: time.Hour, Burst: 100}
			clk := newClock()
			p, err := NewPolicy(PolicyConfig{Classes: []Class{oneClass("plain", lim, "POST /v1/search")},
				Store: limiter.NewMemoryStore(limiter.MemoryConfig{Now: clk.Now})})
			if err != nil {
				t.Fatal(err)
			}
			m, err := New(Config{Policy: p})
			if err != nil {
				t.Fatal(err)
			}
			code, got, _ := checkCall(t, m.CheckHandler(), CheckPath, `{"key":"user:1","endpoint":"POST /v1/search","reserve":true,"estimate":30}`)
			tok, _ := got["reservation"].(string)
			if code != 200 || tok == "" || got["remaining"] != float64(70) {
				t.Fatalf("reserving check: %d %v, want 200 with a reservation and 70 remaining", code, got)
			}
			if tk, err := parseToken(tok); err != nil || !tk.expires.Equal(clk.Now().Add(limiter.DefaultHold)) {
				t.Fatalf("token %+v, %v: want it held for the default hold, %s", tk, err, limiter.DefaultHold)
			}
			code, got, _ = checkCall(t, m.CommitHandler(), CommitPath, `{"reservation":"`+tok+`","cost":10}`)
			if code != 200 || got["refunded"] != float64(20) {
				t.Fatalf("commit: %d %v, want 200 with 20 refunded", code, got)
			}
		})
	}
}

// A class whose limiter cannot hold a reservation refuses "reserve": true with a 400 that names
// the class, the tier and why, and takes nothing; never a 200 without a reservation or a 5xx.
func TestAReservingCheckOnAClassThatCannotReserveIsABadRequestNamingTheClass(t *testing.T) {
	mem := limiter.NewMemoryStore(limiter.MemoryConfig{})
	p, err := NewPolicy(PolicyConfig{Store: mem, DefaultClass: "plain", Classes: []Class{
		{Name: "plain", Limits: map[string]limiter.Limit{"default": limiter.PerMinute(limiter.FixedWindow, 10)}, Store: decideOnly{mem}},
		{Name: "jobs", Routes: []string{"/jobs/"}, Leases: map[string]limiter.LeaseLimit{"default": {Limit: 2, TTL: time.Minute}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(Config{Policy: p})
	if err != nil {
		t.Fatal(err)
	}
	h := m.CheckHandler()
	for _, c := range []struct {
		name, body string
		want       []string
	}{
		{"a store without reservations", `{"key":"user:1","endpoint":"GET /x","reserve":true}`,
			[]string{`class "plain"`, `tier "default"`, "fixed_window", "cannot hold reservations", "store keeps none"}},
		{"a concurrency limit", `{"key":"user:1","endpoint":"POST /jobs/run","lease":true,"reserve":true}`,
			[]string{`class "jobs"`, `tier "default"`, "concurrency limit", "lease"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, got, _ := checkCall(t, h, CheckPath, c.body)
			msg, _ := got["message"].(string)
			if code != 400 || got["error"] != "bad_request" || got["reservation"] != nil || got["lease"] != nil {
				t.Fatalf("%d %v, want 400 bad_request with neither a reservation nor a lease", code, got)
			}
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("message %q does not say %q", msg, w)
				}
			}
		})
	}
	// Nothing was taken: the class's first plain check sees its whole quota.
	if code, got, _ := checkCall(t, h, CheckPath, `{"key":"user:1","endpoint":"GET /x"}`); code != 200 || got["remaining"] != float64(9) {
		t.Fatalf("plain check after the refused reserve: %d %v, want 9 remaining", code, got)
	}
	if code, got, _ := checkCall(t, h, CheckPath, `{"key":"user:1","endpoint":"POST /jobs/run","lease":true}`); code != 200 || got["remaining"] != float64(1) {
		t.Fatalf("lease after the refused reserve: %d %v, want 1 remaining", code, got)
	}
}
