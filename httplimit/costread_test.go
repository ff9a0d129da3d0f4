package httplimit

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// readCost serves h behind a costWriter watching for from and returns what the client got and
// the cost the writer found once the handler returned.
func readCost(t *testing.T, from CostFrom, h http.HandlerFunc) (body string, cost int64, reason string) {
	t.Helper()
	type result struct {
		cost   int64
		reason string
	}
	done := make(chan result, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cw := &costWriter{ResponseWriter: w, read: costReader{from: from}}
		h(cw, r)
		c, why := cw.finish()
		done <- result{c, why}
	}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	res := <-done
	return string(b), res.cost, res.reason
}

func TestCostFromHeaderTrailerAndJSON(t *testing.T) {
	long := `{"text":"` + strings.Repeat("x", 3*MaxCostScan) + `","usage":{"prompt_tokens":3,"total_tokens":42}}`
	cases := []struct {
		name   string
		from   CostFrom
		h      http.HandlerFunc
		cost   int64
		reason string
	}{
		{"header", CostFrom{Header: "X-Usage-Tokens"}, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Usage-Tokens", "120")
			io.WriteString(w, "ok")
		}, 120, ""},
		{"header missing", CostFrom{Header: "X-Usage-Tokens"}, func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, "ok")
		}, 0, CostMissing},
		{"header invalid", CostFrom{Header: "X-Usage-Tokens"}, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Usage-Tokens", "-3")
			io.WriteString(w, "ok")
		}, 0, CostInvalid},
		{"announced trailer", CostFrom{Trailer: "X-Usage-Tokens"}, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Trailer", "X-Usage-Tokens")
			io.WriteString(w, "ok")
			w.Header().Set("X-Usage-Tokens", "77")
		}, 77, ""},
		{"unannounced trailer", CostFrom{Trailer: "X-Usage-Tokens"}, func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, "ok")
			w.(http.Flusher).Flush()
			w.Header().Set(http.TrailerPrefix+"X-Usage-Tokens", "78")
		}, 78, ""},
		{"json", CostFrom{JSON: "usage.total_tokens"}, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"choices":[{"text":"hi"}],`)
			io.WriteString(w, `"usage":{"total_tokens":321}}`)
		}, 321, ""},
		{"json beyond the scan, usage last", CostFrom{JSON: "usage.total_tokens"}, func(w http.ResponseWriter, r *http.Request) {
			for i := 0; i < len(long); i += 1000 {
				io.WriteString(w, long[i:min(i+1000, len(long))])
			}
		}, 42, ""},
		{"json fraction", CostFrom{JSON: "usage.total_tokens"}, func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, `{"usage":{"total_tokens":1.5}}`)
		}, 0, CostInvalid},
		{"json missing", CostFrom{JSON: "usage.total_tokens"}, func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, `{"error":"boom"}`)
		}, 0, CostMissing},
		{"sse final usage chunk", CostFrom{JSON: "usage.total_tokens"}, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}],\"usage\":null}\n\n")
			io.WriteString(w, "data: {\"choices\":[],\"usage\":{\"total_")
			io.WriteString(w, "tokens\":64}}\r\n\r\n")
			io.WriteString(w, "data: [DONE]\n\n")
		}, 64, ""},
		{"sse without usage", CostFrom{JSON: "usage.total_tokens"}, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: {\"choices\":[]}\n\ndata: [DONE]\n\n")
		}, 0, CostMissing},
		{"sse event beyond the scan", CostFrom{JSON: "usage.total_tokens"}, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: {\"pad\":\""+strings.Repeat("y", 2*MaxCostScan)+"\",\"usage\":{\"total_tokens\":9}}\n\n")
			io.WriteString(w, "data: [DONE]\n\n")
		}, 0, CostTooLarge},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, cost, reason := readCost(t, tc.from, tc.h)
			if cost != tc.cost || reason != tc.reason {
				t.Fatalf("cost %d reason %q, want %d %q", cost, reason, tc.cost, tc.reason)
			}
		})
	}
}

// The client gets each event as soon as the handler flushes it, while the cost is still unknown.
func TestCostFromSSEFlushesEachEvent(t *testing.T) {
	next := make(chan struct{})
	done := make(chan int64, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cw := &costWriter{ResponseWriter: w, read: costReader{from: CostFrom{JSON: "usage.total_tokens"}}}
		cw.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(cw, "data: {\"delta\":\"first\"}\n\n")
		http.NewResponseController(cw).Flush()
		<-next
		io.WriteString(cw, "data: {\"usage\":{\"total_tokens\":5}}\n\ndata: [DONE]\n\n")
		c, _ := cw.finish()
		done <- c
	}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	if err != nil || line != "data: {\"delta\":\"first\"}\n" {
		t.Fatalf("first event %q, %v", line, err)
	}
	close(next)
	io.Copy(io.Discard, br)
	select {
	case c := <-done:
		if c != 5 {
			t.Fatalf("cost %d, want 5", c)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("handler did not finish")
	}
}

func TestEstimateFromRequest(t *testing.T) {
	body := `{"model":"m","max_tokens":900,"messages":[]}`
	e := Estimate{Default: 100, JSON: "max_tokens", Max: 500}
	r := httptest.NewRequest("POST", "/v1/chat", strings.NewReader(body))
	if got, _ := e.of(r, 10000); got != 500 {
		t.Fatalf("estimate %d, want the max 500", got)
	}
	if b, _ := io.ReadAll(r.Body); string(b) != body {
		t.Fatalf("upstream would get %q", b)
	}
	r = httptest.NewRequest("POST", "/v1/chat", strings.NewReader(`{"max_tokens":"many"}`))
	if got, _ := e.of(r, 10000); got != 100 {
		t.Fatalf("estimate %d, want the default 100", got)
	}
	big := `{"max_tokens":300,"pad":"` + strings.Repeat("z", 3*MaxCostScan) + `"}`
	r = httptest.NewRequest("POST", "/v1/chat", strings.NewReader(big))
	if got, _ := e.of(r, 10000); got != 300 {
		t.Fatalf("estimate %d, want 300", got)
	}
	if b, _ := io.ReadAll(r.Body); string(b) != big {
		t.Fatalf("upstream got %d bytes of %d", len(b), len(big))
	}
	h := Estimate{Default: 10, Header: "X-Max-Tokens"}
	r = httptest.NewRequest("GET", "/", nil)
	r.Header.Set("X-Max-Tokens", "70000")
	if got, _ := h.of(r, 20000); got != 20000 {
		t.Fatalf("estimate %d, want the quota 20000", got)
	}
}
