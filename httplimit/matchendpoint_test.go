package httplimit

import (
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
		want, werr := endpointRequest(ep)
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
