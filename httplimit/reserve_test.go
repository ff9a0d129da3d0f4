package httplimit

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/eventually"
	"github.com/rl-exporter/rl-exporter/limiter"
)

// costEvents collects what a Middleware told its CostRecorder.
type costEvents struct {
	mu       sync.Mutex
	reserved int64
	settled  []limiter.Settlement
	measured []bool
	expired  int64
	unknown  map[string]int
	dup      map[string]int // by read
}

func (c *costEvents) CostReserved(_, _ string, units int64) {
	c.mu.Lock()
	c.reserved += units
	c.mu.Unlock()
}

func (c *costEvents) CostSettled(_, _ string, s limiter.Settlement, measured bool) {
	c.mu.Lock()
	c.settled, c.measured = append(c.settled, s), append(c.measured, measured)
	c.mu.Unlock()
}

func (c *costEvents) CostExpired(_, _ string, units int64) {
	c.mu.Lock()
	c.expired += units
	c.mu.Unlock()
}

func (c *costEvents) CostUnknown(_, _, reason string) {
	c.mu.Lock()
	if c.unknown == nil {
		c.unknown = map[string]int{}
	}
	c.unknown[reason]++
	c.mu.Unlock()
}

func (c *costEvents) CostDuplicate(_, _, read string) {
	c.mu.Lock()
	if c.dup == nil {
		c.dup = map[string]int{}
	}
	c.dup[read]++
	c.mu.Unlock()
}

// costMiddleware is a middleware on a memory store of clk with one class, "chat", of route,
// 1000 a minute, reading its cost from the response and estimated at estimate, telling its costs.
func costMiddleware(t *testing.T, clk *fakeClock, route string, from CostFrom, estimate int64) (*Middleware, *costEvents) {
	t.Helper()
	cl := oneClass("chat", limiter.PerMinute(limiter.FixedWindow, 1000), route)
	cl.CostFrom, cl.Estimate = from, Estimate{Default: estimate}
	p, err := NewPolicy(PolicyConfig{Classes: []Class{cl}, Store: limiter.NewMemoryStore(limiter.MemoryConfig{Now: clk.Now})})
	if err != nil {
		t.Fatal(err)
	}
	ev := &costEvents{}
	m, err := New(Config{Policy: p, Now: clk.Now, Costs: ev})
	if err != nil {
		t.Fatal(err)
	}
	return m, ev
}

// costServer serves, behind a middleware reserving 100 of a 1000/min budget per request, an
// upstream that reports ?used=N as X-Usage-Tokens and fails on ?fail=1.
func costServer(t *testing.T, clk *fakeClock) (*httptest.Server, *costEvents) {
	t.Helper()
	m, ev := costMiddleware(t, clk, "/v1/chat", CostFrom{Header: "X-Usage-Tokens"}, 100)
	srv := httptest.NewServer(m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("fail") != "" {
			ReportUpstreamFailure(w)
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		if u := r.URL.Query().Get("used"); u != "" {
			w.Header().Set("X-Usage-Tokens", u)
		}
		io.WriteString(w, "answer")
	})))
	t.Cleanup(srv.Close)
	return srv, ev
}

func remainingAfter(t *testing.T, srv *httptest.Server, query string) int64 {
	t.Helper()
	resp, err := http.Get(srv.URL + "/v1/chat?" + query)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	n, err := strconv.ParseInt(resp.Header.Get("X-RateLimit-Remaining"), 10, 64)
	if err != nil {
		t.Fatalf("status %d, X-RateLimit-Remaining %q", resp.StatusCode, resp.Header.Get("X-RateLimit-Remaining"))
	}
	return n
}

// Each request reserves the estimate; the next one sees the budget settled at the real cost.
func TestAResponseCostSettlesTheEstimateReservedAtAdmission(t *testing.T) {
	srv, ev := costServer(t, newClock())
	steps := []struct {
		query string
		want  int64 // remaining once this request's 100 are reserved
	}{
		{"used=30", 900},  // 1000 − 100 reserved
		{"used=250", 870}, // 1000 − 30 − 100
		{"", 620},         // 1000 − 30 − 250 − 100: no header, committed at the estimate
		{"fail=1", 520},   // − 100 more, then cancelled
		{"used=0", 520},   // the cancelled 100 came back
	}
	for _, s := range steps {
		if got := remainingAfter(t, srv, s.query); got != s.want {
			t.Fatalf("%q: remaining %d, want %d", s.query, got, s.want)
		}
	}
	ev.mu.Lock()
	defer ev.mu.Unlock()
	if ev.reserved != 500 || len(ev.settled) != 5 || ev.unknown[CostMissing] != 1 {
		t.Fatalf("reserved %d, settled %+v, unknown %v", ev.reserved, ev.settled, ev.unknown)
	}
	if s := ev.settled[1]; s.Actual != 250 || s.Charged != 150 || !ev.measured[1] {
		t.Errorf("second settlement %+v measured %v, want 150 charged", s, ev.measured[1])
	}
	if s := ev.settled[3]; s.Refunded != 100 || ev.measured[3] {
		t.Errorf("cancelled settlement %+v measured %v, want 100 refunded", s, ev.measured[3])
	}
	if ev.measured[2] {
		t.Error("a response with no cost counted as measured")
	}
}

func TestAClassWithCostFromNeedsAStoreThatHoldsReservations(t *testing.T) {
	cl := oneClass("chat", limiter.PerMinute(limiter.FixedWindow, 1000), "/v1/chat")
	cl.CostFrom, cl.Estimate = CostFrom{Header: "X-Usage-Tokens"}, Estimate{Default: 100}
	_, err := NewPolicy(PolicyConfig{Classes: []Class{cl}, Store: failingStore{}})
	if err == nil {
		t.Fatal("a store without reservations was accepted for cost_from")
	}
	if want := `policy: class "chat" tier "default": cost_from:`; !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("error %q, want it to start %q", err, want)
	}
}

// A client that goes away mid-stream leaves its reservation committed at the estimate, counted
// as client_gone: the upstream's work up to then is not known.
func TestAStreamCutShortCommitsTheEstimateAsClientGone(t *testing.T) {
	m, ev := costMiddleware(t, newClock(), "/v1/chat", CostFrom{JSON: "usage.total_tokens"}, 100)
	handled := make(chan struct{})
	srv := httptest.NewServer(m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(handled)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"delta\":\"a\"}\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/v1/chat")
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 8)
	if _, err := io.ReadFull(resp.Body, buf); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close() // the client goes away before the usage chunk
	<-handled
	eventually.True(t, 5*time.Second, "the reservation settled", func() bool {
		ev.mu.Lock()
		defer ev.mu.Unlock()
		return len(ev.settled) == 1
	})
	ev.mu.Lock()
	defer ev.mu.Unlock()
	if s := ev.settled[0]; s.Actual != 100 || ev.measured[0] || ev.unknown[CostClientGone] != 1 {
		t.Fatalf("settled %+v measured %v unknown %v, want the estimate committed as client_gone", s, ev.measured[0], ev.unknown)
	}
}

// wrappingWriter wraps a response writer as a handler between the middleware and the proxy does
// (serve's overload gate), reaching it through Unwrap alone.
type wrappingWriter struct{ http.ResponseWriter }

func (w wrappingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// A proxy tells the middleware that the upstream gave no answer through the response writer it
// was handed, however wrapped, and the reservation comes back whole; the context way, deprecated,
// still does for now. Where nothing was reserved, nobody listens and the proxy is told so.
func TestAnUpstreamFailureIsReportedThroughTheResponseWriter(t *testing.T) {
	m, _ := costMiddleware(t, newClock(), "/v1/chat", CostFrom{Header: "X-Usage-Tokens"}, 100)
	heard := make(chan bool, 1)
	srv := httptest.NewServer(m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Query().Get("fail") {
		case "wrapped":
			heard <- ReportUpstreamFailure(wrappingWriter{w})
		case "context":
			UpstreamFailed(r.Context())
			heard <- true
		default:
			heard <- false
		}
		w.WriteHeader(http.StatusBadGateway)
	})))
	t.Cleanup(srv.Close)
	for _, s := range []struct {
		query string
		want  int64 // remaining once this request's 100 are reserved
	}{
		{"fail=wrapped", 900},
		{"fail=context", 900}, // the first's 100 came back
		{"fail=none", 900},    // and the second's: this one is committed at its estimate
		{"fail=wrapped", 800},
	} {
		if got := remainingAfter(t, srv, s.query); got != s.want {
			t.Errorf("%s: remaining %d, want %d", s.query, got, s.want)
		}
		if got := <-heard; got != (s.query != "fail=none") {
			t.Errorf("%s: the middleware heard the report: %v", s.query, got)
		}
	}
	if ReportUpstreamFailure(httptest.NewRecorder()) {
		t.Error("a writer the middleware did not hand out took the report")
	}
}
