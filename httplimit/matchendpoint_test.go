package httplimit

import (
	"fmt"
	"testing"

	"github.com/rl-exporter/rl-exporter/limiter"
)

func TestAPlainEndpointMatchesTheRouteAParsedOneWould(t *testing.T) {
	p, err := NewPolicy(PolicyConfig{
		Store: limiter.NewMemoryStore(limiter.MemoryConfig{}),
		Classes: []Class{
			{Name: "orders", Routes: []string{"GET /api/v1/orders/{id}", "POST /api/v1/orders"}, Limits: map[string]limiter.Limit{"default": limiter.PerMinute(limiter.GCRA, 5)}},
			{Name: "files", Routes: []string{"/files/{path...}"}, Limits: map[string]limiter.Limit{"default": limiter.PerMinute(limiter.GCRA, 5)}},
			{Name: "default", Limits: map[string]limiter.Limit{"default": limiter.PerMinute(limiter.GCRA, 5)}},
		},
		DefaultClass: "default",
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, ep := range []string{
		"GET /api/v1/orders/42", "get /api/v1/orders/42", "/api/v1/orders/42", " POST  /api/v1/orders ",
		"DELETE /api/v1/orders/42", "GET /files/a/b;c=d", "GET /files/a%2Fb", "GET /api/v1/orders/4%32",
		"GET /api/v1/orders/42?x=1", "GET /nowhere", "HEAD /api/v1/orders/42", "GET /a:b@c/~d",
	} {
		want, werr := p.endpointRequest(ep)
		got, err := p.matchEndpoint(ep)
		if werr != nil {
			if err == nil || err.Error() != werr.Error() {
				t.Errorf("%q: error %v, want %v", ep, err, werr)
			}
			continue
		}
		if wr := p.match(want); err != nil || got != wr {
			t.Errorf("%q: route %+v (%v), want %+v", ep, got, err, wr)
		}
	}
}

// The decision API's remembered routes are the routes matchEndpoint finds,
// under the policy in force: a new policy starts afresh, errors are not
// kept, and no more than maxRememberedEndpoints endpoints are.
func TestRememberedEndpointsMatchAsThePolicyDoes(t *testing.T) {
	newPolicy := func(route string) *Policy {
		p, err := NewPolicy(PolicyConfig{
			Store: limiter.NewMemoryStore(limiter.MemoryConfig{}),
			Classes: []Class{
				{Name: "orders", Routes: []string{route}, Limits: map[string]limiter.Limit{"default": limiter.PerMinute(limiter.GCRA, 5)}},
				{Name: "default", Limits: map[string]limiter.Limit{"default": limiter.PerMinute(limiter.GCRA, 5)}},
			},
			DefaultClass: "default",
		})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	before, after := newPolicy("GET /api/v1/orders/{id}"), newPolicy("GET /api/v2/orders/{id}")
	var routes endpointRoutes
	for _, p := range []*Policy{before, after, before} {
		for round := 0; round < 2; round++ {
			for _, ep := range []string{"GET /api/v1/orders/42", "GET /api/v2/orders/42", "/api/v1/orders/42", "GET /nowhere", "GET nowhere", "G@T /x"} {
				want, werr := p.matchEndpoint(ep)
				got, err := routes.match(p, ep)
				if (err == nil) != (werr == nil) || got != want {
					t.Fatalf("%q: remembered %+v (%v), the policy matches %+v (%v)", ep, got, err, want, werr)
				}
			}
		}
	}
	for i := 0; i < 2*maxRememberedEndpoints; i++ {
		if _, err := routes.match(before, fmt.Sprintf("GET /random/%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if n := routes.cur.Load().n.Load(); n > maxRememberedEndpoints {
		t.Fatalf("%d endpoints remembered, want at most %d", n, maxRememberedEndpoints)
	}
}

// BenchmarkMatchEndpoint is the route of a decision API request's
// endpoint, matched by the policy and remembered.
func BenchmarkMatchEndpoint(b *testing.B) {
	p, err := NewPolicy(PolicyConfig{
		Store: limiter.NewMemoryStore(limiter.MemoryConfig{}),
		Classes: []Class{
			{Name: "orders", Routes: []string{"GET /api/v1/orders/{id}", "POST /api/v1/orders"}, Limits: map[string]limiter.Limit{"default": limiter.PerMinute(limiter.GCRA, 5)}},
			{Name: "default", Limits: map[string]limiter.Limit{"default": limiter.PerMinute(limiter.GCRA, 5)}},
		},
		DefaultClass: "default",
	})
	if err != nil {
		b.Fatal(err)
	}
	const ep = "GET /api/v1/orders/42"
	b.Run("matched", func(b *testing.B) {
		for b.Loop() {
			if _, err := p.matchEndpoint(ep); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("remembered", func(b *testing.B) {
		var routes endpointRoutes
		for b.Loop() {
			if _, err := routes.match(p, ep); err != nil {
				b.Fatal(err)
			}
		}
	})
}
