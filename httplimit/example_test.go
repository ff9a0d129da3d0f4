package httplimit_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/rl-exporter/rl-exporter/httplimit"
	"github.com/rl-exporter/rl-exporter/limiter"
)

// A Go service puts the middleware in front of its own router. The limit
// applies per client (here the request's IP) to the route pattern, so
// /orders/1, /orders/2 and /orders/3 share one budget of 2.
func Example() {
	policy, err := httplimit.NewPolicy(httplimit.PolicyConfig{
		Store: limiter.NewMemoryStore(limiter.MemoryConfig{}),
		Classes: []httplimit.Class{{
			Name:   "orders",
			Routes: []string{"GET /orders/{id}"},
			Limits: map[string]limiter.Limit{"default": limiter.PerMinute(limiter.FixedWindow, 2)},
		}},
	})
	if err != nil {
		panic(err)
	}
	mw, err := httplimit.New(httplimit.Config{Policy: policy})
	if err != nil {
		panic(err)
	}
	api := http.NewServeMux()
	api.HandleFunc("GET /orders/{id}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "order", r.PathValue("id"))
	})
	handler := mw.Handler(api)

	for id := 1; id <= 3; id++ {
		w := httptest.NewRecorder()
		handler.ServeHTTP(w, httptest.NewRequest("GET", fmt.Sprintf("/orders/%d", id), nil))
		fmt.Println(w.Code, w.Header().Get("X-RateLimit-Remaining"), w.Header().Get("RateLimit-Policy"))
	}
	// Output:
	// 200 1 "orders";q=2;w=60
	// 200 0 "orders";q=2;w=60
	// 429 0 "orders";q=2;w=60
}

// A tier can put several limits on each request, decided as one, as published API limit tables
// do: here 3 requests a minute per client beside 100 tokens (the request's cost, 40 each) a
// minute per client. A request either passes every limit and takes from each, or is refused
// taking from none; RateLimit speaks for the limit closest to its end, and a 429 names every
// limit that refused it.
func Example_tierLimits() {
	policy, err := httplimit.NewPolicy(httplimit.PolicyConfig{
		Store: limiter.NewMemoryStore(limiter.MemoryConfig{}),
		Classes: []httplimit.Class{{
			Name:   "chat",
			Routes: []string{"POST /v1/chat"},
			TierLimits: map[string][]httplimit.TierLimit{"default": {
				{Name: "rpm", Limit: limiter.PerMinute(limiter.FixedWindow, 3), Unit: httplimit.UnitRequests},
				{Name: "tpm", Limit: limiter.PerMinute(limiter.FixedWindow, 100), Unit: httplimit.UnitCost},
			}},
		}},
	})
	if err != nil {
		panic(err)
	}
	mw, err := httplimit.New(httplimit.Config{Policy: policy, Cost: func(*http.Request) int64 { return 40 }})
	if err != nil {
		panic(err)
	}
	handler := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))

	for range 3 {
		w := httptest.NewRecorder()
		handler.ServeHTTP(w, httptest.NewRequest("POST", "/v1/chat", nil))
		remaining, _, _ := strings.Cut(w.Header().Get("RateLimit"), ";t=")
		var body struct {
			RefusedBy []string `json:"refused_by"`
		}
		_ = json.Unmarshal(w.Body.Bytes(), &body)
		fmt.Println(w.Code, remaining, body.RefusedBy)
		if w.Code == http.StatusTooManyRequests {
			fmt.Println(w.Header().Get("RateLimit-Policy"))
		}
	}
	// Output:
	// 200 "tpm";r=60 []
	// 200 "tpm";r=20 []
	// 429 "tpm";r=20 [tpm]
	// "rpm";q=3;w=60;qu="requests", "tpm";q=100;w=60
}
