package httplimit_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"

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
