package httplimit

import (
	"net/http"
	"testing"

	"github.com/rl-exporter/rl-exporter/limiter"
)

func TestPassRouteTellsTheHandlerTheClassEndpointAndTier(t *testing.T) {
	clk := newClock()
	p, err := NewPolicy(PolicyConfig{
		Store: limiter.NewMemoryStore(limiter.MemoryConfig{Now: clk.Now}),
		Tiers: []string{"free", "pro"}, DefaultTier: "free", DefaultClass: "other",
		Classes: []Class{
			{Name: "orders", Routes: []string{"GET /orders/{id}"}, Limits: map[string]limiter.Limit{"free": limiter.PerMinute(limiter.FixedWindow, 10)}},
			{Name: "other", Limits: map[string]limiter.Limit{"free": limiter.PerMinute(limiter.FixedWindow, 10)}},
		},
		Identity: IdentityConfig{UserHeader: "X-User-ID", TierHeader: "X-Plan-Tier", TrustedHeaderPeers: testGateway},
	})
	if err != nil {
		t.Fatal(err)
	}
	var got Route
	var passed bool
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got, passed = RouteFrom(r.Context()) })
	for _, pass := range []bool{false, true} {
		m, err := New(Config{Policy: p, Now: clk.Now, PassRoute: pass})
		if err != nil {
			t.Fatal(err)
		}
		h := m.Handler(inner)
		do(h, "GET", "/orders/7", "192.0.2.1:1", map[string]string{"X-User-ID": "alice", "X-Plan-Tier": "pro"})
		if passed != pass {
			t.Fatalf("PassRoute %v: the handler found a route: %v", pass, passed)
		}
		if !pass {
			continue
		}
		if want := (Route{Class: "orders", Endpoint: "GET /orders/{id}", Tier: "pro"}); got != want {
			t.Fatalf("route %+v, want %+v", got, want)
		}
		do(h, "GET", "/elsewhere", "192.0.2.1:1", nil)
		if want := (Route{Class: "other", Endpoint: CatchAll, Tier: "free"}); got != want {
			t.Fatalf("route %+v, want %+v", got, want)
		}
	}
}
