package httplimit

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

type traceKey struct{}

// traced is one decision as a TraceFunc saw it.
type traced struct {
	endpoint, tier string
	algorithm      limiter.Algorithm
	status         limiter.Status
	allowed        bool
	ended          int
}

// traceLog is a TraceFunc that records its calls, and an Observer that
// records whether the store was called with the context the TraceFunc made.
type traceLog struct {
	mu       sync.Mutex
	list     []*traced
	storeCtx []bool
}

func (l *traceLog) trace(ctx context.Context, endpoint, tier string, alg limiter.Algorithm) (context.Context, func(limiter.Status, limiter.Decision, error)) {
	tr := &traced{endpoint: endpoint, tier: tier, algorithm: alg}
	l.mu.Lock()
	l.list = append(l.list, tr)
	l.mu.Unlock()
	return context.WithValue(ctx, traceKey{}, tr), func(s limiter.Status, d limiter.Decision, _ error) {
		l.mu.Lock()
		tr.status, tr.allowed = s, d.Allowed
		tr.ended++
		l.mu.Unlock()
	}
}

func (l *traceLog) ObserveStore(ctx context.Context, _ string, _ time.Duration, _ error) {
	l.mu.Lock()
	l.storeCtx = append(l.storeCtx, ctx.Value(traceKey{}) != nil)
	l.mu.Unlock()
}

func TestEveryDecisionIsTracedOnceWithItsOutcomeAndTheStoreSeesTheTracedContext(t *testing.T) {
	clk := newClock()
	log := &traceLog{}
	p, err := NewPolicy(PolicyConfig{
		Store:    limiter.NewMemoryStore(limiter.MemoryConfig{Now: clk.Now}),
		Observer: log,
		Classes: []Class{
			oneClass("default", limiter.PerMinute(limiter.FixedWindow, 10)),
			oneClass("search", limiter.PerMinute(limiter.GCRA, 1), "GET /search"),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(Config{Policy: p, Trace: log.trace, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	do(h, "GET", "/search", "192.0.2.1:1", nil)
	do(h, "GET", "/search", "192.0.2.1:1", nil)
	do(h, "GET", "/other", "192.0.2.1:1", nil)
	r2 := newRequest("POST", CheckPath, "192.0.2.1:1")
	r2.Body = nopBody(`{"key":"k","endpoint":"GET /search"}`)
	m.CheckHandler().ServeHTTP(newRecorder(), r2)

	want := []traced{
		{"GET /search", "default", limiter.GCRA, limiter.StatusAllowed, true, 1},
		{"GET /search", "default", limiter.GCRA, limiter.StatusRejected, false, 1},
		{"/", "default", limiter.FixedWindow, limiter.StatusAllowed, true, 1},
		{"GET /search", "default", limiter.GCRA, limiter.StatusAllowed, true, 1},
	}
	if len(log.list) != len(want) {
		t.Fatalf("%d decisions traced, want %d", len(log.list), len(want))
	}
	for i, w := range want {
		if *log.list[i] != w {
			t.Errorf("decision %d traced as %+v, want %+v", i, *log.list[i], w)
		}
	}
	if len(log.storeCtx) != len(want) {
		t.Fatalf("%d store calls, want %d", len(log.storeCtx), len(want))
	}
	for i, ok := range log.storeCtx {
		if !ok {
			t.Errorf("store call %d did not get the traced context", i)
		}
	}
}

type bodyReader struct{ *strings.Reader }

func (bodyReader) Close() error { return nil }

func nopBody(s string) bodyReader { return bodyReader{strings.NewReader(s)} }
