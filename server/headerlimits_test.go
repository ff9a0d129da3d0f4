package server_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rl-exporter/rl-exporter/server"
)

// headRequest is a raw HTTP/1.1 request with fields header field lines,
// Host included, each filler line "X-A: bbbb", then body.
func headRequest(method, path string, fields int, body string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: api.example\r\n", method, path)
	fields--
	if body != "" {
		fmt.Fprintf(&b, "Content-Length: %d\r\n", len(body))
		fields--
	}
	for range fields {
		b.WriteString("X-A: bbbb\r\n")
	}
	b.WriteString("\r\n")
	b.WriteString(body)
	return b.Bytes()
}

// sendRaw writes req on a new connection while reading the answer, and
// returns its status (the server may answer and close before it has read
// the whole request).
func sendRaw(t *testing.T, addr string, req []byte) int {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	go func() { _, _ = c.Write(req) }()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("reading the answer to a %d-byte request: %v", len(req), err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// hugeHead is 90,000 header fields, about 0.99 MB: just under net/http's
// default limit, far over ours.
var hugeHead = headRequest("GET", "/orders", 90_000, "")

func TestOversizedOrTooManyHeadersGet431OnEveryListener(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	srv := startServer(t, server.Config{
		Upstream:      readingUpstream(t, 0),
		MetricsListen: "127.0.0.1:0", AdminListen: "127.0.0.1:0",
		AdminHandlers: map[string]http.Handler{"/debug/x": ok},
	})
	check := `{"key":"user:1","endpoint":"GET /orders"}`
	for _, c := range []struct {
		name, listener, method, path, body string
	}{
		{"the proxy", "main", "GET", "/orders", ""},
		{"the proxy with a body", "main", "POST", "/orders", "x=1"},
		{"the decision API", "main", "POST", "/v1/check", check},
		{"the metrics listener", "metrics", "GET", "/metrics", ""},
		{"the readiness probe", "metrics", "GET", "/readyz", ""},
		{"the admin listener", "admin", "GET", "/debug/x", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			addr := srv.Addr(c.listener)
			served := sendRaw(t, addr, headRequest(c.method, c.path, 3, c.body))
			if served == http.StatusRequestHeaderFieldsTooLarge {
				t.Fatalf("a request with 3 header fields got 431")
			}
			if got := sendRaw(t, addr, headRequest(c.method, c.path, 100, c.body)); got != served {
				t.Errorf("100 header fields: %d, want %d as with 3 (server.max_header_count is 100)", got, served)
			}
			if got := sendRaw(t, addr, headRequest(c.method, c.path, 101, c.body)); got != http.StatusRequestHeaderFieldsTooLarge {
				t.Errorf("101 header fields: %d, want 431", got)
			}
			huge := headRequest(c.method, c.path, 90_000, c.body)
			if got := sendRaw(t, addr, huge); got != http.StatusRequestHeaderFieldsTooLarge {
				t.Errorf("90,000 header fields in %d bytes: %d, want 431", len(huge), got)
			}
		})
	}
	// Each listener counted its 431s: two per request kind, the count's
	// and net/http's.
	for listener, want := range map[string]float64{"main": 6, "metrics": 4, "admin": 2} {
		if got := testutil.ToFloat64(metricOf(t, srv, "rate_limit_oversized_headers_total", listener)); got != want {
			t.Errorf(`rate_limit_oversized_headers_total{listener=%q} %g, want %g`, listener, got, want)
		}
	}
}

func TestTheConfiguredHeaderBytesAreTheBoundOfTheRequestHead(t *testing.T) {
	const limit = 16 << 10
	srv := startServer(t, server.Config{Upstream: readingUpstream(t, 0), MaxHeaderBytes: limit})
	// A request line and three fields, padded to n bytes in all.
	head := func(n int) []byte {
		start := "GET /orders HTTP/1.1\r\nHost: api.example\r\nX-Pad: "
		end := "\r\nX-B: c\r\n\r\n"
		return []byte(start + strings.Repeat("p", n-len(start)-len(end)) + end)
	}
	if got := sendRaw(t, srv.Addr("main"), head(limit)); got != http.StatusOK {
		t.Errorf("a %d-byte head: %d, want 200", limit, got)
	}
	if got := sendRaw(t, srv.Addr("main"), head(limit+1)); got != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("a %d-byte head: %d, want 431", limit+1, got)
	}
}

func TestNewRefusesAHeaderByteBoundBelowTheMinimum(t *testing.T) {
	_, err := server.New(server.Config{Listen: "127.0.0.1:0", Middleware: testMiddleware(t), MaxHeaderBytes: 4096})
	if err == nil || !strings.Contains(err.Error(), "MaxHeaderBytes") {
		t.Errorf("New with MaxHeaderBytes 4096: %v, want an error naming MaxHeaderBytes", err)
	}
}
