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

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rl-exporter/rl-exporter/server"
)

// rawAnswer writes req on a new connection while reading the answer, and returns it with
// its body.
func rawAnswer(t *testing.T, addr string, req []byte) (*http.Response, string) {
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
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

// gatewayHead is a forward-auth request as nginx sends it (X-Original-URI, X-Deny-Status
// 403), with the client's own fields lines of "X-Pn: value" padded to size bytes in all.
func gatewayHead(path string, fields, size int) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "GET %s HTTP/1.1\r\nHost: api.example\r\nX-Original-URI: /hello\r\nX-Deny-Status: 403\r\n", path)
	end := "\r\n"
	pad := size - b.Len() - len(end) - fields*len("X-P00000: v\r\n")
	for i := range fields {
		v := "v"
		if i == 0 && pad > 0 {
			v += strings.Repeat("v", pad)
		}
		fmt.Fprintf(&b, "X-P%05d: %s\r\n", i, v)
	}
	b.WriteString(end)
	return b.Bytes()
}

// serverMetric is the value of the server's metric name with label=value.
func serverMetric(t *testing.T, srv *server.Server, name, label, value string) float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(srv.Metrics()); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no %s{%s=%q} in the server metrics", name, label, value)
	return 0
}

// Whatever head a gateway forwards, /v1/auth answers with a decision or with the refusal the
// gateway passes on (403 for nginx), never 431: nginx takes any other status as the limiter's
// failure, which its example lets through unchecked.
func TestForwardAuthAnswersEveryHeadAGatewayForwardsWithADecisionOrItsDenyStatus(t *testing.T) {
	for _, c := range []struct {
		name     string
		upstream bool
		fields   int
		size     int
		want     int    // status
		reason   string // the refusal's, "" for a decision
	}{
		{"a usual head", false, 3, 200, http.StatusOK, ""},
		{"98 of the client's headers: 101 fields with the gateway's", false, 98, 2000, http.StatusForbidden, "request_too_large"},
		{"150 headers", false, 150, 3000, http.StatusForbidden, "request_too_large"},
		{"70 KB of headers in a few fields: within the forward-auth bound", false, 5, 70 << 10, http.StatusOK, ""},
		{"a head just past 1 MiB", false, 5, 1<<20 + 10_000, http.StatusForbidden, "request_too_large"},
		{"75,000 headers in 1 MB", false, 75_000, 1 << 20, http.StatusForbidden, "request_too_large"},
		{"150 headers to a serve that also proxies", true, 150, 3000, http.StatusForbidden, "request_too_large"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := server.Config{}
			if c.upstream {
				cfg.Upstream = readingUpstream(t, 0)
			}
			srv := startServer(t, cfg)
			resp, body := rawAnswer(t, srv.Addr("main"), gatewayHead("/v1/auth", c.fields, c.size))
			if resp.StatusCode != c.want {
				t.Fatalf("status %d %q, want %d", resp.StatusCode, body, c.want)
			}
			if c.reason == "" {
				if resp.Header.Get("X-RateLimit-Limit") == "" {
					t.Errorf("a decision without X-RateLimit-Limit: %v", resp.Header)
				}
				return
			}
			if !strings.Contains(body, `"error":"`+c.reason+`"`) || resp.Header.Get("Cache-Control") != "no-store" {
				t.Errorf("body %q, Cache-Control %q: want error %s and no-store", body, resp.Header.Get("Cache-Control"), c.reason)
			}
			if got := serverMetric(t, srv, "rate_limit_auth_denied_total", "reason", c.reason); got != 1 {
				t.Errorf("rate_limit_auth_denied_total{reason=%q} %g, want 1", c.reason, got)
			}
		})
	}
}

// Reading forward-auth heads up to 1 MiB leaves the other paths of the listener bounded by
// server.max_header_bytes, with the same 431.
func TestWithoutAnUpstreamTheOtherPathsKeepTheHeaderByteBound(t *testing.T) {
	srv := startServer(t, server.Config{})
	for _, path := range []string{"/v1/check", "/metrics", "/anything"} {
		resp, body := rawAnswer(t, srv.Addr("main"), gatewayHead(path, 5, 70<<10))
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("%s with a 70 KB head: %d %q, want 431", path, resp.StatusCode, body)
		}
	}
	if got := serverMetric(t, srv, "rate_limit_oversized_headers_total", "listener", "main"); got != 3 {
		t.Errorf("rate_limit_oversized_headers_total{listener=main} %g, want 3", got)
	}
}

// A serve that also proxies bounds its public listener's heads at max_header_bytes, which a
// gateway forwarding every client header can pass: server.auth_listen gives forward-auth a
// listener of its own that reads heads up to auth_max_header_bytes and answers each with a
// decision or the deny status, while the public listener keeps its bound.
func TestAServeThatProxiesAnswersForwardAuthOnItsOwnListenerWithinTheLargerBound(t *testing.T) {
	srv := startServer(t, server.Config{Upstream: readingUpstream(t, 0), AuthListen: "127.0.0.1:0"})
	if srv.Addr("auth") == "" {
		t.Fatal("no auth listener")
	}
	for _, c := range []struct {
		name         string
		fields, size int
		want         int
	}{
		{"70 KB of headers in a few fields", 5, 70 << 10, http.StatusOK},
		{"150 headers", 150, 3000, http.StatusForbidden},
		{"a head just past 1 MiB", 5, 1<<20 + 10_000, http.StatusForbidden},
	} {
		if resp, body := rawAnswer(t, srv.Addr("auth"), gatewayHead("/v1/auth", c.fields, c.size)); resp.StatusCode != c.want {
			t.Errorf("%s to the auth listener: %d %q, want %d", c.name, resp.StatusCode, body, c.want)
		}
	}
	if resp, body := rawAnswer(t, srv.Addr("main"), gatewayHead("/v1/auth", 5, 70<<10)); resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("70 KB to the public listener: %d %q, want its 431", resp.StatusCode, body)
	}
	if resp, _ := rawAnswer(t, srv.Addr("auth"), gatewayHead("/anything", 3, 200)); resp.StatusCode != http.StatusNotFound {
		t.Errorf("another path on the auth listener: %d, want 404", resp.StatusCode)
	}
}
