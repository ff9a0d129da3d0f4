package httplimit

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/eventually"
	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
)

// leasedTier is the flagship tier's shape: requests and tokens per minute per client beside at
// most inflight requests in flight per client.
func leasedTier(tpm, inflight int64) []TierLimit {
	return []TierLimit{
		{Name: "rpm", Limit: limiter.PerMinute(limiter.SlidingWindow, 500), Unit: UnitRequests},
		{Name: "tpm", Limit: limiter.Limit{Algorithm: limiter.TokenBucket, Rate: tpm, Period: time.Hour}, Unit: UnitCost},
		{Name: "inflight", Lease: &limiter.LeaseLimit{Limit: inflight, TTL: time.Minute}},
	}
}

// setupLeasedChat is a Middleware whose chat class has leasedTier, the request's cost read from
// X-Cost, its leases counted by rec.
func setupLeasedChat(t *testing.T, store limiter.Store, tpm, inflight int64, rec limiter.Recorder) *Middleware {
	t.Helper()
	cfg := chatPolicy(store)
	cfg.Classes[0].TierLimits["default"] = leasedTier(tpm, inflight)
	p, err := NewPolicy(cfg)
	if err != nil {
		t.Fatalf("NewPolicy: %v", err)
	}
	m, err := New(Config{Policy: p, Recorder: rec, Cost: func(r *http.Request) int64 {
		if r.Header.Get("X-Cost") == "60" {
			return 60
		}
		return 10
	}})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m
}

// inFlight is the usage of chat's inflight limit for alice.
func inFlight(t *testing.T, m *Middleware) int64 {
	t.Helper()
	u := partUsage(t, m, "user:alice", "chat", "inflight", nil)
	if u.InFlight == nil || u.Algorithm != limiter.Concurrency {
		t.Fatalf("inflight usage %+v: want a concurrency limit with in_flight", u)
	}
	return *u.InFlight
}

// holdChats starts n requests of alice through h that g holds.
func holdChats(h http.Handler, g *gate, n int, wg *sync.WaitGroup) {
	for range n {
		wg.Go(func() {
			h.ServeHTTP(httptest.NewRecorder(), requestWith("POST", "/v1/chat", gatewayPeer, map[string]string{"X-User-ID": "alice"}))
		})
		<-g.entered
	}
}

func requestWith(method, path, remote string, hdr map[string]string) *http.Request {
	r := httptest.NewRequest(method, path, nil)
	r.RemoteAddr = remote
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	return r
}

// A tier's concurrency limit among its rate limits: the request beyond it is refused by it
// alone, with a concurrency refusal's Retry-After and its policy in requests in flight, and the
// rate limits take nothing from the refused request; a response that ends frees its slot.
func TestATierLeaseRefusesTheRequestBeyondItAndTakesFromNoOtherLimit(t *testing.T) {
	store := limiter.NewMemoryStore(limiter.MemoryConfig{Now: newClock().Now})
	rec := &leaseRecords{}
	m := setupLeasedChat(t, store, 200000, 20, rec)
	g := newGate()
	h := m.Handler(g)
	var wg sync.WaitGroup
	holdChats(h, g, 20, &wg)

	w := chat(h, "alice", "", 10)
	if w.Code != http.StatusTooManyRequests || !strings.Contains(w.Body.String(), `"refused_by":["inflight"]`) {
		t.Fatalf("21st: %d %s, want 429 refused by inflight", w.Code, w.Body)
	}
	if got := w.Header().Get("Retry-After"); got != "1" {
		t.Errorf("Retry-After %q, want a concurrency refusal's 1", got)
	}
	pol := strings.Split(w.Header().Get("RateLimit-Policy"), ", ")
	if !slices.Contains(pol, `"inflight";q=20;qu="concurrent-requests"`) || len(pol) != 3 {
		t.Errorf("RateLimit-Policy %q: want rpm, tpm and inflight in requests in flight", pol)
	}
	if u := partUsage(t, m, "user:alice", "chat", "rpm", nil); u.Used != 20 {
		t.Errorf("rpm used %d, want 20: the refused request took nothing", u.Used)
	}
	if u := partUsage(t, m, "user:alice", "chat", "tpm", nil); u.Used != 200 {
		t.Errorf("tpm used %d, want 200: the refused request took nothing", u.Used)
	}
	if n := inFlight(t, m); n != 20 {
		t.Errorf("in flight %d, want 20", n)
	}

	close(g.release)
	wg.Wait()
	if n := inFlight(t, m); n != 0 {
		t.Errorf("in flight %d after every response ended, want 0", n)
	}
	if rec.held() != 0 {
		t.Errorf("recorded in flight %d, want 0", rec.held())
	}
	if w := chat(h, "alice", "", 10); w.Code != http.StatusOK {
		t.Fatalf("after the responses ended: %d %s", w.Code, w.Body)
	}
}

// A request a rate limit refuses gives back the lease it took at once: it holds none.
func TestARequestARateLimitRefusesHoldsNoLease(t *testing.T) {
	store := limiter.NewMemoryStore(limiter.MemoryConfig{Now: newClock().Now})
	rec := &leaseRecords{}
	m := setupLeasedChat(t, store, 100, 20, rec)
	g := newGate()
	h := m.Handler(g)
	var wg sync.WaitGroup
	wg.Go(func() {
		h.ServeHTTP(httptest.NewRecorder(), requestWith("POST", "/v1/chat", gatewayPeer, map[string]string{"X-User-ID": "alice", "X-Cost": "60"}))
	})
	<-g.entered
	w := chat(h, "alice", "", 60)
	if w.Code != http.StatusTooManyRequests || !strings.Contains(w.Body.String(), `"refused_by":["tpm"]`) {
		t.Fatalf("second: %d %s, want 429 refused by tpm", w.Code, w.Body)
	}
	if n := inFlight(t, m); n != 1 {
		t.Errorf("in flight %d, want the first request's 1 alone", n)
	}
	if rec.held() != 1 {
		t.Errorf("recorded in flight %d, want 1", rec.held())
	}
	close(g.release)
	wg.Wait()
	if n := inFlight(t, m); n != 0 {
		t.Errorf("in flight %d after the response ended, want 0", n)
	}
}

// The proxy's way: a lease is held until the response body is done, and freed when the client
// goes away mid-response.
func TestATierLeaseIsHeldUntilTheResponseEnds(t *testing.T) {
	store := limiter.NewMemoryStore(limiter.MemoryConfig{Now: newClock().Now})
	m := setupLeasedChat(t, store, 200000, 2, nil)
	g := newGate()
	srv := httptest.NewServer(m.Handler(g))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/v1/chat", nil)
		req.Header.Set("X-User-ID", "alice")
		if resp, err := srv.Client().Do(req); err == nil {
			_ = resp.Body.Close()
		}
	}()
	<-g.entered
	// The request comes from 127.0.0.1, no trusted peer: its client is its address.
	u := partUsage(t, m, "ip:127.0.0.1", "chat", "inflight", nil)
	if u.InFlight == nil || *u.InFlight != 1 {
		t.Fatalf("in flight %+v while served, want 1", u)
	}
	cancel()
	<-done
	eventually.True(t, 5*time.Second, "the lease of a client gone away is released", func() bool {
		u := partUsage(t, m, "ip:127.0.0.1", "chat", "inflight", nil)
		return u.InFlight != nil && *u.InFlight == 0
	})
}

// The decision API takes a tier's lease with "lease": true, answers its token, and /v1/release
// gives it back; usage shows it in flight meanwhile.
func TestTheDecisionAPIHoldsATierLeaseUntilReleased(t *testing.T) {
	store := limiter.NewMemoryStore(limiter.MemoryConfig{Now: newClock().Now})
	rec := &leaseRecords{}
	m := setupLeasedChat(t, store, 100, 1, rec)
	h, rel := m.CheckHandler(), m.ReleaseHandler()
	ask := `{"key":"user:alice","endpoint":"POST /v1/chat","lease":true,"cost":10}`
	if code, out, _ := checkCall(t, h, CheckPath, `{"key":"user:alice","endpoint":"POST /v1/chat"}`); code != 400 || !strings.Contains(out["message"].(string), `"lease": true`) {
		t.Fatalf("without lease: %d %v", code, out)
	}
	code, out, hdr := checkCall(t, h, CheckPath, ask)
	lease, _ := out["lease"].(string)
	if code != 200 || out["allowed"] != true || lease == "" || !strings.Contains(hdr.Get("RateLimit-Policy"), `"inflight";q=1;qu="concurrent-requests"`) {
		t.Fatalf("first: %d %v %v", code, out, hdr)
	}
	if n := inFlight(t, m); n != 1 {
		t.Fatalf("in flight %d, want 1", n)
	}
	code, out, hdr = checkCall(t, h, CheckPath, ask)
	if code != 429 || out["lease"] != nil || hdr.Get("Retry-After") != "1" || !slices.Equal(anyStrings(out["refused_by"]), []string{"inflight"}) {
		t.Fatalf("second: %d %v %v", code, out, hdr)
	}
	if u := partUsage(t, m, "user:alice", "chat", "tpm", nil); u.Used != 10 {
		t.Errorf("tpm used %d, want 10: the refused check took nothing", u.Used)
	}
	if code, out, _ = checkCall(t, rel, ReleasePath, `{"lease":"`+lease+`"}`); code != 200 || out["released"] != true {
		t.Fatalf("release: %d %v", code, out)
	}
	if n := inFlight(t, m); n != 0 || rec.held() != 0 {
		t.Fatalf("in flight %d (recorded %d) after the release, want 0", n, rec.held())
	}
	// Refused by tpm (10 of 100 taken, 95 asked): no lease is held afterwards.
	code, out, _ = checkCall(t, h, CheckPath, `{"key":"user:alice","endpoint":"POST /v1/chat","lease":true,"cost":95}`)
	if code != 429 || out["lease"] != nil || !slices.Equal(anyStrings(out["refused_by"]), []string{"tpm"}) {
		t.Fatalf("over tpm: %d %v", code, out)
	}
	if n := inFlight(t, m); n != 0 || rec.held() != 0 {
		t.Fatalf("in flight %d (recorded %d) after a refusal by tpm, want 0", n, rec.held())
	}
}

func anyStrings(v any) []string {
	var out []string
	for _, s := range v.([]any) {
		out = append(out, s.(string))
	}
	return out
}

// On Redis too: the request beyond the tier's concurrency limit takes nothing from its rate
// limits, one refused by a rate limit holds no lease, and a response that ends frees its slot.
func TestATierLeaseOnRedis(t *testing.T) {
	srv := redistest.Single(t)
	client, err := redisstore.ClientConfig{URL: srv.URL()}.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	rs, err := redisstore.New(client, redisstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	m := setupLeasedChat(t, rs, 100, 2, nil)
	g := newGate()
	h := m.Handler(g)
	var wg sync.WaitGroup
	holdChats(h, g, 2, &wg)
	if w := chat(h, "alice", "", 10); w.Code != http.StatusTooManyRequests || !strings.Contains(w.Body.String(), `"refused_by":["inflight"]`) {
		t.Fatalf("third: %d %s, want 429 refused by inflight", w.Code, w.Body)
	}
	if u := partUsage(t, m, "user:alice", "chat", "tpm", nil); u.Used != 20 {
		t.Errorf("tpm used %d, want 20", u.Used)
	}
	close(g.release)
	wg.Wait()
	if n := inFlight(t, m); n != 0 {
		t.Fatalf("in flight %d after the responses ended, want 0", n)
	}
	if w := chat(h, "alice", "", 60); w.Code != http.StatusOK {
		t.Fatalf("60 of 80 left: %d %s", w.Code, w.Body)
	}
	if w := chat(h, "alice", "", 60); w.Code != http.StatusTooManyRequests || !strings.Contains(w.Body.String(), `"refused_by":["tpm"]`) {
		t.Fatalf("60 of 20 left: %d %s, want refused by tpm", w.Code, w.Body)
	}
	if n := inFlight(t, m); n != 0 {
		t.Fatalf("in flight %d after a refusal by tpm, want 0", n)
	}
}

// Forward-auth takes a tier's lease and answers its token, which the gateway renews and gives
// back; a lease scoped to the class (no tier in its key) names its tier in the token.
func TestForwardAuthTakesATierLeaseOfAGlobalScope(t *testing.T) {
	store := limiter.NewMemoryStore(limiter.MemoryConfig{Now: newClock().Now})
	cfg := chatPolicy(store)
	cfg.Classes[0].TierLimits["default"] = []TierLimit{
		{Name: "rpm", Limit: limiter.PerMinute(limiter.SlidingWindow, 500)},
		{Name: "backend", Lease: &limiter.LeaseLimit{Limit: 1, TTL: time.Minute}, Scope: Scope{Kind: ScopeGlobal}},
	}
	p, err := NewPolicy(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(Config{Policy: p})
	if err != nil {
		t.Fatal(err)
	}
	authH := m.AuthHandler()
	ask := func() *httptest.ResponseRecorder {
		return auth(authH, "GET", AuthPath, map[string]string{"X-Original-URI": "/v1/chat", "X-Original-Method": "POST"})
	}
	w := ask()
	tok := w.Header().Get(LeaseHeader)
	if w.Code != http.StatusOK || tok == "" {
		t.Fatalf("first auth: %d, %s %q", w.Code, LeaseHeader, tok)
	}
	if w := ask(); w.Code != http.StatusTooManyRequests || w.Header().Get(LeaseHeader) != "" || !strings.Contains(w.Body.String(), `"refused_by":["backend"]`) {
		t.Fatalf("second auth: %d %v %s, want 429 refused by backend", w.Code, w.Header(), w.Body)
	}
	rw := httptest.NewRecorder()
	rr := httptest.NewRequest(http.MethodPost, RenewPath, nil)
	rr.Header.Set(LeaseHeader, tok)
	m.RenewHandler().ServeHTTP(rw, rr)
	if rw.Code != http.StatusOK {
		t.Fatalf("renew: %d %s", rw.Code, rw.Body)
	}
	if code, out := releaseByHeader(m.ReleaseHandler(), tok, ""); code != http.StatusOK || out["released"] != true {
		t.Fatalf("release: %d %v", code, out)
	}
	if w := ask(); w.Code != http.StatusOK {
		t.Fatalf("auth after the release: %d %s", w.Code, w.Body)
	}
}
