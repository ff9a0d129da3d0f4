package httplimit

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// dupServer serves, behind a middleware of one class "chat" of 100000 a minute estimated by est
// and charged from, an upstream that answers the request's X-Answer header as the body (with the
// Content-Type of X-Answer-Type) and each X-Answer-Cost value as an X-Usage-Tokens line.
func dupServer(t *testing.T, est Estimate, from CostFrom) (*httptest.Server, *costEvents) {
	t.Helper()
	cl := oneClass("chat", limiter.PerMinute(limiter.FixedWindow, 100000), "/v1/chat")
	cl.CostFrom, cl.Estimate = from, est
	clk := newClock()
	p, err := NewPolicy(PolicyConfig{Classes: []Class{cl}, Store: limiter.NewMemoryStore(limiter.MemoryConfig{Now: clk.Now})})
	if err != nil {
		t.Fatal(err)
	}
	ev := &costEvents{}
	m, err := New(Config{Policy: p, Now: clk.Now, Costs: ev})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if ct := r.Header.Get("X-Answer-Type"); ct != "" {
			w.Header().Set("Content-Type", ct)
		}
		for _, v := range r.Header.Values("X-Answer-Cost") {
			w.Header().Add("X-Usage-Tokens", v)
		}
		io.WriteString(w, strings.ReplaceAll(r.Header.Get("X-Answer"), "|", "\n"))
	})))
	t.Cleanup(srv.Close)
	return srv, ev
}

// send posts body with the headers hdr (a header given twice is two lines) and waits for its
// reservation to be settled.
func send(t *testing.T, srv *httptest.Server, body string, hdr [][2]string) {
	t.Helper()
	req, err := http.NewRequest("POST", srv.URL+"/v1/chat", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range hdr {
		req.Header.Add(kv[0], kv[1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d, want 200", resp.StatusCode)
	}
}

// A client cannot shrink its estimate by naming it twice: JSON parsers disagree on which of two
// equal members wins, so the largest is reserved, and the repeat counted.
func TestARequestThatNamesItsEstimateTwiceReservesTheLargest(t *testing.T) {
	for _, c := range []struct {
		name string
		est  Estimate
		body string
		hdr  [][2]string
		want int64
		dup  int
	}{
		{"a member given twice", Estimate{Default: 10, JSON: "max_tokens"}, `{"max_tokens":1,"max_tokens":4000}`, nil, 4000, 1},
		{"the larger first", Estimate{Default: 10, JSON: "max_tokens"}, `{"max_tokens":4000,"messages":[{"max_tokens":9999}],"max_tokens":1}`, nil, 4000, 1},
		{"spelt with an escape", Estimate{Default: 10, JSON: "max_tokens"}, `{"max_tokens":1,"max_\u0074okens":4000}`, nil, 4000, 1},
		{"a nested object given twice", Estimate{Default: 10, JSON: "params.max_tokens"}, `{"params":{"max_tokens":1},"params":{"max_tokens":4000}}`, nil, 4000, 1},
		{"a nested member given twice", Estimate{Default: 10, JSON: "params.max_tokens"}, `{"params":{"max_tokens":4000,"max_tokens":1}}`, nil, 4000, 1},
		{"once", Estimate{Default: 10, JSON: "max_tokens"}, `{"max_tokens":700,"note":"max_tokens"}`, nil, 700, 0},
		{"a number and a string", Estimate{Default: 10, JSON: "max_tokens"}, `{"max_tokens":"1","max_tokens":300}`, nil, 300, 1},
		{"a header given twice", Estimate{Default: 10, Header: "X-Max-Tokens"}, "", [][2]string{{"X-Max-Tokens", "1"}, {"X-Max-Tokens", "4000"}}, 4000, 1},
		{"a header listing two", Estimate{Default: 10, Header: "X-Max-Tokens"}, "", [][2]string{{"X-Max-Tokens", "4000, 1"}}, 4000, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv, ev := dupServer(t, c.est, CostFrom{Header: "X-Usage-Tokens"})
			send(t, srv, c.body, c.hdr)
			ev.mu.Lock()
			defer ev.mu.Unlock()
			if ev.reserved != c.want || ev.dup["estimate"] != c.dup {
				t.Errorf("reserved %d, duplicates %v; want %d reserved, %d estimate duplicate(s)", ev.reserved, ev.dup, c.want, c.dup)
			}
		})
	}
}

// estimate.min is a floor under what a request says.
func TestAnEstimateIsNeverBelowItsMin(t *testing.T) {
	est := Estimate{Default: 500, Min: 200, Max: 4000, JSON: "max_tokens"}
	for body, want := range map[string]int64{
		`{"max_tokens":1}`: 200, `{"max_tokens":300}`: 300, `{}`: 500, `{"max_tokens":9000}`: 4000,
	} {
		srv, ev := dupServer(t, est, CostFrom{Header: "X-Usage-Tokens"})
		send(t, srv, body, nil)
		ev.mu.Lock()
		if ev.reserved != want {
			t.Errorf("%s: reserved %d, want %d", body, ev.reserved, want)
		}
		ev.mu.Unlock()
	}
	for _, bad := range []Estimate{{Default: 100, Min: 200}, {Default: 300, Min: -1}, {Default: 300, Min: 200, Max: 100}} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// An upstream that reports its usage twice is charged the largest, in a JSON body, an SSE event
// and a header alike.
func TestAResponseThatReportsItsCostTwiceIsChargedTheLargest(t *testing.T) {
	const twice = `{"usage":{"total_tokens":1},"usage":{"total_tokens":900}}`
	for _, c := range []struct {
		name string
		from CostFrom
		hdr  [][2]string
	}{
		{"JSON body", CostFrom{JSON: "usage.total_tokens"}, [][2]string{{"X-Answer", twice}}},
		{"JSON body, the member repeated inside", CostFrom{JSON: "usage.total_tokens"}, [][2]string{{"X-Answer", `{"usage":{"total_tokens":900,"total_tokens":1}}`}}},
		{"SSE event", CostFrom{JSON: "usage.total_tokens"}, [][2]string{
			{"X-Answer-Type", "text/event-stream"},
			{"X-Answer", `data: {"delta":"a"}||data: ` + twice + "||data: [DONE]||"}}},
		{"header", CostFrom{Header: "X-Usage-Tokens"}, [][2]string{{"X-Answer-Cost", "900"}, {"X-Answer-Cost", "1"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv, ev := dupServer(t, Estimate{Default: 10}, c.from)
			send(t, srv, "{}", c.hdr)
			ev.mu.Lock()
			defer ev.mu.Unlock()
			if len(ev.settled) != 1 || ev.settled[0].Actual != 900 || ev.dup["cost"] != 1 {
				t.Errorf("settled %+v, duplicates %v; want 900 charged and 1 cost duplicate", ev.settled, ev.dup)
			}
		})
	}
}

// Past the bytes read ahead the member may be named again, and the upstream reads the last: a
// body that runs past them reserves at least the default, whatever its first bytes say.
func TestARequestLongerThanTheBytesReadAheadReservesAtLeastTheDefault(t *testing.T) {
	e := Estimate{JSON: "max_tokens", Default: 1000, Max: 4000, Min: 1}
	body := `{"max_tokens":1,"pad":"` + strings.Repeat("x", MaxCostScan) + `","max_tokens":4000}`
	r := httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader(body))
	if n, _ := e.of(r, 100000); n != 1000 {
		t.Errorf("a body past the %d bytes read ahead reserves %d, want the default 1000", MaxCostScan, n)
	}
	if b, _ := io.ReadAll(r.Body); string(b) != body {
		t.Errorf("the upstream gets %d bytes, want the body unchanged (%d)", len(b), len(body))
	}
	small := httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader(`{"max_tokens":10}`))
	if n, _ := e.of(small, 100000); n != 10 {
		t.Errorf("a whole body naming 10 reserves %d, want 10", n)
	}
}
