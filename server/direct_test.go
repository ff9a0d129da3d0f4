package server_test

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/httplimit"
	"github.com/rl-exporter/rl-exporter/internal/eventually"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/server"
)

// The proxy reaches a plain http:// upstream over kept-alive HTTP/1.1
// connections on the request's own goroutine; these tests hold it to what
// net/http's Transport does for every kind of answer and failure.

func TestEveryKindOfUpstreamAnswerPassesThroughTheProxy(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/length":
			w.Header().Set("X-Kind", "length")
			_, _ = io.WriteString(w, "a body of known length\n")
		case "/chunked":
			w.Header().Set("Trailer", "X-Checksum")
			for i := range 3 {
				_, _ = io.WriteString(w, strings.Repeat(string(rune('a'+i)), 5000))
				w.(http.Flusher).Flush()
			}
			w.Header().Set("X-Checksum", "abc")
		case "/empty":
			w.WriteHeader(http.StatusNoContent)
		case "/not-modified":
			w.Header().Set("ETag", `"v1"`)
			w.WriteHeader(http.StatusNotModified)
		case "/early-hints":
			w.Header().Set("Link", "</style.css>; rel=preload")
			w.WriteHeader(http.StatusEarlyHints)
			_, _ = io.WriteString(w, "after the hints\n")
		case "/close":
			w.Header().Set("Connection", "close")
			_, _ = io.WriteString(w, "last one on this connection\n")
		case "/error":
			http.Error(w, "upstream says no", http.StatusTeapot)
		default:
			_, _ = io.WriteString(w, r.Method+" "+r.URL.RequestURI()+" host="+r.Host+" xff="+r.Header.Get("X-Forwarded-For")+"\n")
		}
	}))
	defer up.Close()
	base := startProxy(t, up.URL, server.TransportConfig{})

	for _, c := range []struct {
		name, method, path string
		wantStatus         int
		wantBody           string
		wantHeader         [2]string
		wantTrailer        [2]string
	}{
		{name: "a body of known length arrives whole with its headers", method: "GET", path: "/length",
			wantStatus: 200, wantBody: "a body of known length\n", wantHeader: [2]string{"X-Kind", "length"}},
		{name: "a chunked body arrives whole with its trailer", method: "GET", path: "/chunked",
			wantStatus: 200, wantBody: strings.Repeat("a", 5000) + strings.Repeat("b", 5000) + strings.Repeat("c", 5000),
			wantTrailer: [2]string{"X-Checksum", "abc"}},
		{name: "a HEAD answer has its headers and no body", method: "HEAD", path: "/length",
			wantStatus: 200, wantHeader: [2]string{"X-Kind", "length"}},
		{name: "a 204 has no body", method: "GET", path: "/empty", wantStatus: 204},
		{name: "a 304 keeps its validator", method: "GET", path: "/not-modified",
			wantStatus: 304, wantHeader: [2]string{"Etag", `"v1"`}},
		{name: "the final answer after 103 Early Hints arrives", method: "GET", path: "/early-hints",
			wantStatus: 200, wantBody: "after the hints\n"},
		{name: "an answer that closes its connection arrives whole", method: "GET", path: "/close",
			wantStatus: 200, wantBody: "last one on this connection\n"},
		{name: "an upstream error status passes unchanged", method: "GET", path: "/error",
			wantStatus: http.StatusTeapot, wantBody: "upstream says no\n"},
		{name: "the path, query, host and forwarding chain reach the upstream", method: "DELETE", path: "/orders/7?force=1",
			wantStatus: 200, wantBody: "DELETE /orders/7?force=1 host=" + strings.TrimPrefix(base, "http://") + " xff=127.0.0.1\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			// Twice: the second time on a connection the first one left
			// in the pool (or on a new one after /close).
			for round := range 2 {
				req, _ := http.NewRequest(c.method, base+c.path, nil)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatalf("round %d: %v", round, err)
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil {
					t.Fatalf("round %d: reading the body: %v", round, err)
				}
				if resp.StatusCode != c.wantStatus || string(body) != c.wantBody {
					t.Fatalf("round %d: %d %q; want %d %q", round, resp.StatusCode, body, c.wantStatus, c.wantBody)
				}
				if k := c.wantHeader[0]; k != "" && resp.Header.Get(k) != c.wantHeader[1] {
					t.Errorf("round %d: header %s = %q; want %q", round, k, resp.Header.Get(k), c.wantHeader[1])
				}
				if k := c.wantTrailer[0]; k != "" && resp.Trailer.Get(k) != c.wantTrailer[1] {
					t.Errorf("round %d: trailer %s = %q; want %q", round, k, resp.Trailer.Get(k), c.wantTrailer[1])
				}
			}
		})
	}
}

func TestEarlyHintsAreForwardedToTheClient(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		_, _ = io.WriteString(w, "page\n")
	}))
	defer up.Close()
	base := startProxy(t, up.URL, server.TransportConfig{})
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, _ = io.WriteString(conn, "GET /page HTTP/1.1\r\nHost: test\r\n\r\n")
	br := bufio.NewReader(conn)
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	hints, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if hints.StatusCode != http.StatusEarlyHints || hints.Header.Get("Link") != "</style.css>; rel=preload" {
		t.Fatalf("first answer %d with Link %q; want 103 with the upstream's Link", hints.StatusCode, hints.Header.Get("Link"))
	}
	final, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(final.Body)
	if final.StatusCode != 200 || string(body) != "page\n" {
		t.Errorf("final answer %d %q; want 200 %q", final.StatusCode, body, "page\n")
	}
}

func TestAnUpstreamClosingIdleConnectionsFailsNoRequest(t *testing.T) {
	var accepted atomic.Int64
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.Method+" ok\n")
	}))
	up.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			accepted.Add(1)
		}
	}
	up.Start()
	defer up.Close()
	base := startProxy(t, up.URL, server.TransportConfig{})
	// A request that may not be sent twice (a POST without a body), after
	// the upstream closed the connection the proxy keeps idle, as an
	// upstream does after its own keep-alive timeout or when it restarts.
	for i, method := range []string{"GET", "POST", "DELETE", "GET"} {
		req, _ := http.NewRequest(method, base+"/x", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != method+" ok\n" {
			t.Fatalf("%s after the upstream closed its idle connections: %d %q; want 200", method, resp.StatusCode, body)
		}
		if got := accepted.Load(); got != int64(i+1) {
			t.Fatalf("request %d reached the upstream on connection %d; want a fresh one each time", i+1, got)
		}
		up.CloseClientConnections()
		// Nothing on the proxy's side to wait on: the claim is that a
		// connection the upstream closed a moment ago is not reused.
		time.Sleep(20 * time.Millisecond)
	}
}

func TestAClientGoingAwayCancelsTheUpstreamRequest(t *testing.T) {
	cancelled := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
			close(cancelled)
		case <-time.After(10 * time.Second):
		}
	}))
	defer up.Close()
	base := startProxy(t, up.URL, server.TransportConfig{})
	c := &http.Client{Timeout: 200 * time.Millisecond}
	if resp, err := c.Get(base + "/slow"); err == nil {
		resp.Body.Close()
		t.Fatalf("status %d from an upstream that never answers; want the client's timeout", resp.StatusCode)
	}
	select {
	case <-cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream still works on the request 5s after its client went away; want it cancelled")
	}
}

func TestABodyLeftUnreadDoesNotSpoilTheNextRequest(t *testing.T) {
	big := bytes.Repeat([]byte("x"), 1<<20)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			_, _ = w.Write(big)
			return
		}
		_, _ = io.WriteString(w, "small\n")
	}))
	defer up.Close()
	base := startProxy(t, up.URL, server.TransportConfig{MaxIdleConnsPerHost: 1})
	for range 3 {
		// The client reads a little of a large body and hangs up.
		conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(conn, "GET /big HTTP/1.1\r\nHost: test\r\n\r\n")
		_, _ = io.ReadFull(conn, make([]byte, 4096))
		conn.Close()
		resp, err := http.Get(base + "/small")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != "small\n" {
			t.Fatalf("after a body left half-read: %d %q; want 200 %q", resp.StatusCode, body, "small\n")
		}
	}
}

func TestUpstreamConnectionsIdleForIdleConnTimeoutAreClosed(t *testing.T) {
	var open atomic.Int64
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "hello\n")
	}))
	up.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			open.Add(1)
		case http.StateClosed, http.StateHijacked:
			open.Add(-1)
		}
	}
	up.Start()
	defer up.Close()
	base := startProxy(t, up.URL, server.TransportConfig{IdleConnTimeout: 200 * time.Millisecond})
	load(t, base, 4, 5)
	if open.Load() == 0 {
		t.Fatal("no upstream connection open after the requests: the proxy keeps none for reuse")
	}
	eventually.Within(5*time.Second, func() bool { return open.Load() == 0 })
	if n := open.Load(); n != 0 {
		t.Errorf("%d upstream connections still open 5s after the load ended; want them closed after the 200ms idle timeout", n)
	}
}

// seen is what an upstream received of one request.
type seen struct {
	Method, RequestURI, Host string
	Header                   http.Header
	Body                     string
}

func TestTheProxyForwardsTheHeadersReverseProxyForwards(t *testing.T) {
	got := make(chan seen, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := r.Header.Clone()
		h.Del("Accept-Encoding") // the test client's own transport adds it
		body, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, r.RequestURI, r.Host, h, string(body)}
		w.Header().Set("Connection", "X-Internal")
		w.Header().Set("X-Internal", "for the proxy only")
		w.Header().Set("Keep-Alive", "timeout=5")
		w.Header().Set("X-Public", "yes")
	}))
	defer up.Close()
	upURL, _ := url.Parse(up.URL)
	base := startProxy(t, up.URL, server.TransportConfig{})
	// What httputil.ReverseProxy, as serve configured it before the
	// direct path, sends for the same request.
	rp := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(upURL)
		pr.Out.Host = pr.In.Host
		if prior, ok := pr.In.Header["X-Forwarded-For"]; ok {
			pr.Out.Header["X-Forwarded-For"] = append([]string(nil), prior...)
		}
		pr.SetXForwarded()
	}})
	defer rp.Close()
	// And through a class that reads its estimate from the request's JSON body and its cost
	// from the response: the upstream gets the same request, body included.
	priced := costClass("priced", httplimit.CostFrom{Header: "X-Usage-Tokens"}, 10, limiter.PerSecond(limiter.GCRA, 1_000_000), "/")
	priced.Estimate.JSON = "max_tokens"
	cost := startCostProxy(t, up.URL, limiter.NewMemoryStore(limiter.MemoryConfig{}), priced)

	for _, c := range []struct {
		name, method, target string
		header               http.Header
	}{
		{"a plain GET", "GET", "/orders/42", nil},
		{"a query and an escaped path", "GET", "/a%3Ab/c%20d?x=1&y=%C3%A9", nil},
		{"a POST without a body", "POST", "/orders", nil},
		{"a DELETE", "DELETE", "/orders/42", nil},
		{"headers with several values", "GET", "/", http.Header{"Accept": {"text/html", "application/json"}, "X-Tag": {"a", "b", "c"}}},
		{"hop-by-hop headers and those Connection names", "GET", "/", http.Header{
			"Connection": {"X-Secret, keep-alive"}, "X-Secret": {"s"}, "Keep-Alive": {"timeout=5"},
			"Proxy-Authorization": {"Basic eA=="}, "Proxy-Connection": {"keep-alive"}, "Te": {"trailers, deflate"},
		}},
		{"a forwarding chain and forged forwarding headers", "GET", "/", http.Header{
			"X-Forwarded-For": {"203.0.113.7, 198.51.100.2"}, "X-Forwarded-Host": {"forged"}, "X-Forwarded-Proto": {"https"},
			"Forwarded": {"for=203.0.113.7"},
		}},
		{"no User-Agent", "GET", "/", http.Header{"User-Agent": {""}}},
		{"a POST with a JSON body", "POST", "/v1/chat", http.Header{"Content-Type": {"application/json"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var want seen
			for i, target := range []string{rp.URL, base, cost.base} {
				var body io.Reader
				if c.method == http.MethodPost && c.header != nil {
					body = strings.NewReader(`{"model":"m","max_tokens":300,"messages":[]}`)
				}
				req, _ := http.NewRequest(c.method, target+c.target, body)
				for k, vv := range c.header {
					req.Header[k] = vv
				}
				req.Host = "api.example"
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.Header.Get("X-Public") != "yes" || resp.Header.Get("X-Internal") != "" || resp.Header.Get("Keep-Alive") != "" {
					t.Errorf("response headers %v; want X-Public and neither X-Internal nor Keep-Alive (hop-by-hop)", resp.Header)
				}
				var have seen
				select {
				case have = <-got:
				case <-time.After(10 * time.Second):
					t.Fatalf("through %s: answered %d, but the upstream got no request", []string{"ReverseProxy", "plain", "cost_from"}[i], resp.StatusCode)
				}
				if i == 0 {
					want = have
				} else if !reflect.DeepEqual(have, want) {
					t.Errorf("the upstream got\n  %+v\nthrough serve (%s); ReverseProxy sends\n  %+v", have, []string{"", "plain", "cost_from"}[i], want)
				}
			}
		})
	}
}
