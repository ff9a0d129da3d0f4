package httplimit

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/eventually"
	"github.com/rl-exporter/rl-exporter/limiter"
)

// leaseRecords is records that also counts leases, as the collector does.
type leaseRecords struct {
	records
	mu               sync.Mutex
	inFlight, expiry int64
}

func (r *leaseRecords) RecordLeases(_ context.Context, _, _ string, inFlight, expired int64) {
	r.mu.Lock()
	r.inFlight += inFlight
	r.expiry += expired
	r.mu.Unlock()
}

func (r *leaseRecords) held() int64 { r.mu.Lock(); defer r.mu.Unlock(); return r.inFlight }

// leasePolicy is one class, "api", under a concurrency limit of n.
func leasePolicy(t *testing.T, st limiter.Store, n int64, hc HeaderConfig) *Policy {
	t.Helper()
	p, err := NewPolicy(PolicyConfig{Store: st, Headers: hc, Classes: []Class{{Name: "api",
		Leases: map[string]limiter.LeaseLimit{"default": {Limit: n, TTL: time.Minute}}}}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// gate is a handler that holds each request until release is closed, after
// telling entered.
type gate struct {
	entered chan struct{}
	release chan struct{}
}

func newGate() *gate { return &gate{entered: make(chan struct{}, 100), release: make(chan struct{})} }

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.entered <- struct{}{}
	select {
	case <-g.release:
	case <-r.Context().Done():
		return
	}
	_, _ = w.Write([]byte("ok"))
}

func TestAConcurrencyLimitRefusesTheRequestBeyondItAndFreesTheSlotWhenAResponseEnds(t *testing.T) {
	st := limiter.NewMemoryStore(limiter.MemoryConfig{})
	rec := &leaseRecords{}
	m, err := New(Config{Policy: leasePolicy(t, st, 2, HeaderConfig{}), Recorder: rec})
	if err != nil {
		t.Fatal(err)
	}
	g := newGate()
	h := m.Handler(g)
	var wg sync.WaitGroup
	held := make([]*httptest.ResponseRecorder, 2)
	for i := range held {
		held[i] = httptest.NewRecorder()
		wg.Go(func() { h.ServeHTTP(held[i], httptest.NewRequest("GET", "/x", nil)) })
		<-g.entered
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/x", nil))
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "1" {
		t.Fatalf("third request: %d, Retry-After %q, want 429 with 1", w.Code, w.Header().Get("Retry-After"))
	}
	if got, want := w.Header().Get("RateLimit-Policy"), `"api";q=2;qu="concurrent-requests"`; got != want {
		t.Errorf("RateLimit-Policy %q, want %q: a quota of 2 in flight, no window", got, want)
	}
	if got, want := w.Header().Get("RateLimit"), `"api";r=0`; got != want {
		t.Errorf("RateLimit %q, want %q: nothing free, no reset", got, want)
	}
	if w.Header().Get("X-RateLimit-Reset") != "" {
		t.Error("X-RateLimit-Reset on a concurrency limit, which never resets")
	}
	var body RejectedBody
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || body.Error != "concurrency_limit_exceeded" || body.RetryAfter != 1 {
		t.Errorf("body %s (%v)", w.Body, err)
	}
	if rec.held() != 2 {
		t.Fatalf("in flight %d, want 2", rec.held())
	}
	close(g.release)
	wg.Wait()
	if got := held[0].Header().Get("RateLimit"); got != `"api";r=1` && got != `"api";r=0` {
		t.Errorf("an admitted request's RateLimit %q", got)
	}
	if st.Leases("api|default|/|ip:192.0.2.1") != 0 || rec.held() != 0 {
		t.Fatalf("leases left after the responses ended: store %d, in flight %d", st.Leases("api|default|/|ip:192.0.2.1"), rec.held())
	}
	w = httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/x", nil))
	if w.Code != http.StatusOK {
		t.Fatalf("after the responses ended: %d", w.Code)
	}
	statuses := map[limiter.Status]int{}
	for _, r := range rec.all() {
		statuses[r.Status]++
	}
	if statuses[limiter.StatusAllowed] != 3 || statuses[limiter.StatusRejected] != 1 {
		t.Fatalf("recorded %v, want 3 allowed and 1 rejected", statuses)
	}
}

// A client that goes away mid-response frees its slot: the handler's
// context ends, it returns, and the lease is released on a context of its
// own.
func TestAClientThatDisconnectsMidResponseFreesItsSlot(t *testing.T) {
	st := limiter.NewMemoryStore(limiter.MemoryConfig{})
	rec := &leaseRecords{}
	m, err := New(Config{Policy: leasePolicy(t, st, 1, HeaderConfig{}), Recorder: rec})
	if err != nil {
		t.Fatal(err)
	}
	streaming := make(chan struct{})
	var once sync.Once // the request after the disconnect streams too
	srv := httptest.NewServer(m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("first chunk\n"))
		w.(http.Flusher).Flush()
		once.Do(func() { close(streaming) })
		<-r.Context().Done() // a body that never ends on its own
	})))
	t.Cleanup(srv.Close)
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write([]byte("GET /x HTTP/1.1\r\nHost: a\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%v %v", resp, err)
	}
	<-streaming
	if r := get(t, srv.URL); r != http.StatusTooManyRequests {
		t.Fatalf("while the first streams: %d, want 429", r)
	}
	conn.Close()
	eventually.True(t, 5*time.Second, "the slot of the client that went away is free", func() bool { return rec.held() == 0 })
	if r := get(t, srv.URL); r != http.StatusOK {
		t.Fatalf("after the client went away: %d", r)
	}
}

func get(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url + "/x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestAConcurrencyRefusalInProblemJSONNamesTheClass(t *testing.T) {
	st := limiter.NewMemoryStore(limiter.MemoryConfig{})
	m, err := New(Config{Policy: leasePolicy(t, st, 1, HeaderConfig{ProblemJSON: true, OmitRateLimit: true})})
	if err != nil {
		t.Fatal(err)
	}
	g := newGate()
	h := m.Handler(g)
	done := make(chan struct{})
	go func() { h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/x", nil)); close(done) }()
	<-g.entered
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/x", nil))
	close(g.release)
	<-done
	var pb ProblemBody
	if err := json.Unmarshal(w.Body.Bytes(), &pb); err != nil || w.Code != 429 || len(pb.ViolatedPolicies) != 1 || pb.ViolatedPolicies[0] != "api" {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if w.Header().Get("RateLimit-Policy") != "" || !strings.HasPrefix(w.Header().Get("Content-Type"), "application/problem+json") {
		t.Fatalf("headers %v", w.Header())
	}
}

func TestAPolicyMixesRateAndConcurrencyTiers(t *testing.T) {
	st := limiter.NewMemoryStore(limiter.MemoryConfig{})
	p, err := NewPolicy(PolicyConfig{Store: st, Tiers: []string{"free", "pro"}, DefaultTier: "free", Classes: []Class{{Name: "api",
		Limits: map[string]limiter.Limit{"pro": limiter.PerMinute(limiter.GCRA, 100)},
		Leases: map[string]limiter.LeaseLimit{"free": {Limit: 3, TTL: time.Minute}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if l := p.Limits(); len(l) != 1 || l[0].PlanTier != "pro" {
		t.Fatalf("Limits %+v, want the pro tier's rate limit alone", l)
	}
	if l := p.LeaseLimits(); len(l) != 1 || l[0].PlanTier != "free" || l[0].Limit.Limit != 3 {
		t.Fatalf("LeaseLimits %+v", l)
	}
	_, err = NewPolicy(PolicyConfig{Store: st, Classes: []Class{{Name: "api",
		Limits: map[string]limiter.Limit{"default": limiter.PerMinute(limiter.GCRA, 100)},
		Leases: map[string]limiter.LeaseLimit{"default": {Limit: 3}}}}})
	if err == nil || !strings.Contains(err.Error(), "both") {
		t.Fatalf("a tier with both: %v", err)
	}
}

func checkCall(t *testing.T, h http.Handler, path, body string) (int, map[string]any, http.Header) {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("POST", path, strings.NewReader(body)))
	var out map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
		t.Fatalf("%s %s: %d %q: %v", path, body, w.Code, w.Body, err)
	}
	return w.Code, out, w.Header()
}

// jobsLeases is a middleware with class api on /jobs/ under a concurrency limit of n, the rest
// 10 a minute, and the records counting its leases.
func jobsLeases(t *testing.T, n int64) (*Middleware, *leaseRecords) {
	t.Helper()
	st := limiter.NewMemoryStore(limiter.MemoryConfig{})
	p, err := NewPolicy(PolicyConfig{Store: st, Classes: []Class{
		{Name: "api", Routes: []string{"/jobs/"}, Leases: map[string]limiter.LeaseLimit{"default": {Limit: n, TTL: time.Minute}}},
		{Name: "other", Limits: map[string]limiter.Limit{"default": limiter.PerMinute(limiter.GCRA, 10)}},
	}, DefaultClass: "other"})
	if err != nil {
		t.Fatal(err)
	}
	rec := &leaseRecords{}
	m, err := New(Config{Policy: p, Recorder: rec})
	if err != nil {
		t.Fatal(err)
	}
	return m, rec
}

func TestTheDecisionAPIHandsOutLeasesAndReleasesThem(t *testing.T) {
	m, rec := jobsLeases(t, 1)
	h, rel := m.CheckHandler(), m.ReleaseHandler()
	ask := `{"key":"user:1","endpoint":"POST /jobs/run","lease":true}`
	code, out, hdr := checkCall(t, h, CheckPath, ask)
	lease, _ := out["lease"].(string)
	if code != 200 || out["allowed"] != true || lease == "" || hdr.Get("RateLimit-Policy") != `"api";q=1;qu="concurrent-requests"` {
		t.Fatalf("first: %d %v %v", code, out, hdr)
	}
	if code, out, hdr = checkCall(t, h, CheckPath, ask); code != 429 || out["lease"] != nil || hdr.Get("Retry-After") != "1" {
		t.Fatalf("second: %d %v", code, out)
	}
	if code, out, _ = checkCall(t, h, CheckPath, `{"key":"user:1","endpoint":"POST /jobs/run"}`); code != 400 || !strings.Contains(out["message"].(string), `"lease": true`) {
		t.Fatalf("without lease: %d %v", code, out)
	}
	if code, out, _ = checkCall(t, h, CheckPath, `{"key":"user:1","endpoint":"GET /elsewhere","lease":true}`); code != 400 {
		t.Fatalf("a lease on a rate limit: %d %v", code, out)
	}
	if code, out, _ = checkCall(t, rel, ReleasePath, `{"lease":"`+lease+`"}`); code != 200 || out["released"] != true {
		t.Fatalf("release: %d %v", code, out)
	}
	if rec.held() != 0 {
		t.Fatalf("in flight %d after the release", rec.held())
	}
	if code, out, _ = checkCall(t, rel, ReleasePath, `{"lease":"`+lease+`"}`); code != 404 || out["error"] != "lease_unknown" {
		t.Fatalf("released twice: %d %v", code, out)
	}
	forged := strings.Repeat("0", 32) + lease[32:]
	if code, _, _ = checkCall(t, rel, ReleasePath, `{"lease":"`+forged+`"}`); code != 404 {
		t.Fatalf("a guessed id: %d", code)
	}
	if code, _, _ = checkCall(t, rel, ReleasePath, `{"lease":"nonsense"}`); code != 400 {
		t.Fatalf("a malformed lease: %d", code)
	}
	if code, _, _ = checkCall(t, h, CheckPath, ask); code != 200 {
		t.Fatalf("after the release: %d", code)
	}
}

type downLeaser struct{ *limiter.MemoryStore }

func (downLeaser) AcquireLease(context.Context, string, limiter.LeaseLimit, string, time.Duration) (limiter.LeaseDecision, error) {
	return limiter.LeaseDecision{}, errors.New("connection refused")
}

// A shadow class passes what its concurrency limit would refuse, counted as
// shadow_rejected; a store that fails under fail_policy closed answers 503.
func TestConcurrencyLimitsInShadowAndWhenTheStoreFails(t *testing.T) {
	st := limiter.NewMemoryStore(limiter.MemoryConfig{})
	p, err := NewPolicy(PolicyConfig{Store: st, Classes: []Class{{Name: "api", Shadow: true,
		Leases: map[string]limiter.LeaseLimit{"default": {Limit: 1, TTL: time.Minute}}}}})
	if err != nil {
		t.Fatal(err)
	}
	rec := &leaseRecords{}
	m, _ := New(Config{Policy: p, Recorder: rec})
	g := newGate()
	h := m.Handler(g)
	done := make(chan struct{})
	go func() { h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/x", nil)); close(done) }()
	<-g.entered
	w := httptest.NewRecorder()
	second := make(chan struct{})
	go func() { h.ServeHTTP(w, httptest.NewRequest("GET", "/x", nil)); close(second) }()
	<-g.entered // the second is let through while the first holds the one lease
	close(g.release)
	<-done
	<-second
	if w.Code != http.StatusOK || w.Header().Get("RateLimit") != "" {
		t.Fatalf("shadow over the limit: %d %v, want 200 without rate-limit headers", w.Code, w.Header())
	}
	var shadow int
	for _, r := range rec.all() {
		if r.Status == limiter.StatusShadowRejected {
			shadow++
		}
	}
	if shadow != 1 {
		t.Fatalf("%d shadow_rejected recorded, want 1: %+v", shadow, rec.all())
	}

	p, err = NewPolicy(PolicyConfig{Store: downLeaser{st}, FailPolicy: limiter.FailClosed, Classes: []Class{{Name: "api",
		Leases: map[string]limiter.LeaseLimit{"default": {Limit: 1, TTL: time.Minute}}}}})
	if err != nil {
		t.Fatal(err)
	}
	m, _ = New(Config{Policy: p})
	w = httptest.NewRecorder()
	m.Handler(g).ServeHTTP(w, httptest.NewRequest("GET", "/x", nil))
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") != "1" || !strings.Contains(w.Body.String(), "rate_limit_unavailable") {
		t.Fatalf("fail closed: %d %v %s", w.Code, w.Header(), w.Body)
	}
}
