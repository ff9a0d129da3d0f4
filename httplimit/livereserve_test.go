package httplimit

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/decision"
	"github.com/rl-exporter/rl-exporter/limiter"
)

// liveCostMiddleware is a middleware on a memory store of clk with one class, "chat", reading its
// cost from the response, holding reservations for hold with onExpiry, whose default tier is
// under a live change to 500 a day.
func liveCostMiddleware(t *testing.T, clk *fakeClock, hold time.Duration, onExpiry limiter.ExpiryPolicy) *Middleware {
	t.Helper()
	cl := oneClass("chat", limiter.Limit{Algorithm: limiter.FixedWindow, Rate: 1000, Period: 24 * time.Hour}, "POST /v1/chat")
	cl.CostFrom, cl.Estimate = CostFrom{JSON: "usage.total_tokens"}, Estimate{Default: 100}
	cl.Hold, cl.OnExpiry = hold, onExpiry
	cl.Live = map[string]decision.LiveLimit{"default": {
		Limit: limiter.Limit{Algorithm: limiter.FixedWindow, Rate: 500, Period: 24 * time.Hour}, RolloutPercent: 100, Source: "rl:config:chat:default",
	}}
	p, err := NewPolicy(PolicyConfig{Classes: []Class{cl}, Store: limiter.NewMemoryStore(limiter.MemoryConfig{Now: clk.Now})})
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(Config{Policy: p, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// A live change replaces a cost_from class's limit, not its reservation settings: a reservation
// taken under it is held for the class's hold and expires by the class's on_expiry.
func TestALiveLimitKeepsTheClassHoldAndExpiryPolicy(t *testing.T) {
	clk := newClock()
	m := liveCostMiddleware(t, clk, 30*time.Minute, limiter.ExpireRefund)
	check := httptest.NewServer(m.CheckHandler())
	defer check.Close()
	commit := httptest.NewServer(m.CommitHandler())
	defer commit.Close()

	code, got := postJSON(t, check.URL, `{"key":"user:7","endpoint":"POST /v1/chat","reserve":true}`)
	tok, _ := got["reservation"].(string)
	if code != 200 || tok == "" || got["limit"] != float64(500) || got["remaining"] != float64(400) {
		t.Fatalf("reserving check under the live limit: %d %v", code, got)
	}
	parsed, err := parseToken(tok)
	if err != nil {
		t.Fatal(err)
	}
	if want := clk.Now().Add(30 * time.Minute); !parsed.expires.Equal(want) {
		t.Fatalf("reservation expires %s, want the class's hold of 30m: %s", parsed.expires, want)
	}
	// Past the default hold, within the class's: still open.
	clk.Advance(limiter.DefaultHold + time.Minute)
	if code, got := postJSON(t, commit.URL, `{"reservation":"`+tok+`","cost":40}`); code != 200 || got["refunded"] != float64(60) {
		t.Fatalf("commit within the class's hold: %d %v, want 200 with 60 refunded", code, got)
	}

	// One left unsettled past the hold is refunded, as the class says, not charged.
	code, got = postJSON(t, check.URL, `{"key":"user:8","endpoint":"POST /v1/chat","reserve":true}`)
	if code != 200 || got["remaining"] != float64(400) {
		t.Fatalf("second reserving check: %d %v", code, got)
	}
	clk.Advance(31 * time.Minute)
	// The next reservation on the key settles the expired one first.
	code, got = postJSON(t, check.URL, `{"key":"user:8","endpoint":"POST /v1/chat","reserve":true,"estimate":1}`)
	if code != 200 || got["remaining"] != float64(499) {
		t.Fatalf("after the reservation expired: %d %v, want 499 remaining (the 100 refunded)", code, got)
	}
}
