package httplimit

import (
	"net/http"
	"strings"
	"testing"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// Allocation budgets of the middleware's own work per request (identity,
// route match, limiter key, decision, headers), without net/http's. The
// benchmarks fail when over:
//
//	go test -run '^$' -bench Middleware -benchmem ./httplimit
const (
	middlewareAllocBudget = 6
	checkAllocBudget      = 12
	authAllocBudget       = 6
)

// discardWriter is a ResponseWriter that keeps only its header map, cleared
// before each request as net/http gives each response a fresh one.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) WriteHeader(int)             {}

func benchPolicy(b *testing.B) *Middleware {
	b.Helper()
	p, err := NewPolicy(PolicyConfig{
		Store: limiter.NewMemoryStore(limiter.MemoryConfig{}),
		Classes: []Class{
			{Name: "orders", Routes: []string{"GET /api/v1/orders/{id}"}, Limits: map[string]limiter.Limit{"default": limiter.PerSecond(limiter.GCRA, 100_000_000)}},
			{Name: "default", Limits: map[string]limiter.Limit{"default": limiter.PerSecond(limiter.GCRA, 100_000_000)}},
		},
		DefaultClass: "default",
	})
	if err != nil {
		b.Fatal(err)
	}
	m, err := New(Config{Policy: p})
	if err != nil {
		b.Fatal(err)
	}
	return m
}

func BenchmarkMiddleware(b *testing.B) {
	m := benchPolicy(b)
	next := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	h := m.Handler(next)
	r, _ := http.NewRequest(http.MethodGet, "http://bench/api/v1/orders/42", nil)
	r.RemoteAddr = "10.1.2.3:40000"
	w := &discardWriter{h: http.Header{}}
	b.Run("allowed", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			clear(w.h)
			h.ServeHTTP(w, r)
		}
		if w.h.Get("X-RateLimit-Remaining") == "" {
			b.Fatal("no rate-limit headers: the request was not decided")
		}
		checkBudget(b, middlewareAllocBudget, func() { clear(w.h); h.ServeHTTP(w, r) })
	})
	b.Run("check", func(b *testing.B) {
		api := m.CheckHandler()
		body := `{"key":"user:bench","endpoint":"GET /api/v1/orders/42"}`
		br := strings.NewReader(body)
		r, _ := http.NewRequest(http.MethodPost, "http://bench/v1/check", br)
		serve := func() {
			clear(w.h)
			br.Reset(body)
			r.Body = http.NoBody
			r.Body = readCloser{br}
			api.ServeHTTP(w, r)
		}
		b.ReportAllocs()
		for b.Loop() {
			serve()
		}
		if w.h.Get("X-RateLimit-Remaining") == "" {
			b.Fatal("no rate-limit headers: the request was not decided")
		}
		checkBudget(b, checkAllocBudget, serve)
	})
}

func BenchmarkAuthHandler(b *testing.B) {
	m := benchPolicy(b)
	h := m.AuthHandler()
	w := &discardWriter{h: http.Header{}}
	for name, r := range map[string]*http.Request{
		"nginx": func() *http.Request {
			r, _ := http.NewRequest(http.MethodGet, "http://bench"+AuthPath, nil)
			r.Header.Set("X-Original-URI", "/api/v1/orders/42?page=2")
			r.Header.Set("X-Original-Method", "GET")
			return r
		}(),
		"envoy": func() *http.Request {
			r, _ := http.NewRequest(http.MethodGet, "http://bench"+AuthPath+"/api/v1/orders/42", nil)
			return r
		}(),
	} {
		r.RemoteAddr = "10.1.2.3:40000"
		b.Run(name, func(b *testing.B) {
			serve := func() { clear(w.h); h.ServeHTTP(w, r) }
			b.ReportAllocs()
			for b.Loop() {
				serve()
			}
			if w.h.Get("X-RateLimit-Limit") != "100000000" {
				b.Fatalf("headers %v: not decided on the orders class", w.h)
			}
			checkBudget(b, authAllocBudget, serve)
		})
	}
}

type readCloser struct{ *strings.Reader }

func (readCloser) Close() error { return nil }

// checkBudget fails the benchmark loudly when fn allocates more than budget.
func checkBudget(b *testing.B, budget float64, fn func()) {
	b.Helper()
	if got := testing.AllocsPerRun(200, fn); got > budget {
		b.Errorf("OVER BUDGET: %.1f allocations per request, budget %.0f", got, budget)
	}
}
