package httplimit

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// fakeClock is a controllable clock shared by the store and the middleware.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *fakeClock { return &fakeClock{t: time.Unix(1_700_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// records collects every Record, in order.
type records struct {
	mu   sync.Mutex
	list []limiter.Record
}

func (r *records) RecordDecision(_ context.Context, rec limiter.Record) {
	r.mu.Lock()
	r.list = append(r.list, rec)
	r.mu.Unlock()
}

func (r *records) all() []limiter.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]limiter.Record(nil), r.list...)
}

// setup builds a policy on a memory store with clk, and a middleware in
// front of a handler that answers 200 "ok".
func setup(t *testing.T, cfg PolicyConfig, clk *fakeClock) (*Middleware, http.Handler, *records) {
	t.Helper()
	if cfg.Store == nil {
		cfg.Store = limiter.NewMemoryStore(limiter.MemoryConfig{Now: clk.Now})
	}
	p, err := NewPolicy(cfg)
	if err != nil {
		t.Fatalf("NewPolicy: %v", err)
	}
	rec := &records{}
	m, err := New(Config{Policy: p, Recorder: rec, Now: clk.Now})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("ok"))
	}))
	return m, h, rec
}

// do sends one request from remote with the given headers.
func do(h http.Handler, method, path, remote string, hdr map[string]string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, nil)
	r.RemoteAddr = remote
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func oneClass(name string, lim limiter.Limit, routes ...string) Class {
	return Class{Name: name, Routes: routes, Limits: map[string]limiter.Limit{"default": lim}}
}

func decodeJSON(t *testing.T, body []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("body %q is not JSON: %v", body, err)
	}
}

type httptestRecorder = httptest.ResponseRecorder

func newRecorder() *httptest.ResponseRecorder { return httptest.NewRecorder() }

func newRequest(method, path, remote string) *http.Request {
	r := httptest.NewRequest(method, path, nil)
	r.RemoteAddr = remote
	return r
}
