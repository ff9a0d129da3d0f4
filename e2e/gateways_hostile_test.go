package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/eventually"
)

// rawAPI is the API behind a gateway, counting the requests that reach it by their request
// line as sent: one whose path net/http would not parse (a bad escape) counts too.
type rawAPI struct {
	ln    net.Listener
	mu    sync.Mutex
	lines []string
	conns map[net.Conn]struct{}
}

func newRawAPI(t *testing.T) *rawAPI {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := &rawAPI{ln: ln, conns: map[net.Conn]struct{}{}}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			a.mu.Lock()
			a.conns[c] = struct{}{}
			a.mu.Unlock()
			go a.serve(c)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		a.mu.Lock()
		defer a.mu.Unlock()
		for c := range a.conns {
			c.Close()
		}
	})
	return a
}

// serve answers each request of c with 200 "api\n", keeping c open as a gateway's upstream
// keepalive expects.
func (a *rawAPI) serve(c net.Conn) {
	defer c.Close()
	r := bufio.NewReaderSize(c, 1<<20)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		length := 0
		for {
			h, err := r.ReadString('\n')
			if err != nil {
				return
			}
			if h == "\r\n" || h == "\n" {
				break
			}
			if k, v, ok := strings.Cut(h, ":"); ok && strings.EqualFold(k, "Content-Length") {
				length, _ = strconv.Atoi(strings.TrimSpace(v))
			}
		}
		if _, err := io.CopyN(io.Discard, r, int64(length)); err != nil {
			return
		}
		a.mu.Lock()
		a.lines = append(a.lines, strings.TrimSpace(line))
		a.mu.Unlock()
		if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 4\r\n\r\napi\n"); err != nil {
			return
		}
	}
}

func (a *rawAPI) addr() string { return a.ln.Addr().String() }

// reached is how many requests reached the API with a path under prefix.
func (a *rawAPI) reached(prefix string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, l := range a.lines {
		if f := strings.Fields(l); len(f) == 3 && strings.HasPrefix(f[1], prefix) {
			n++
		}
	}
	return n
}

// hostileRequest is a request a client shapes to make /v1/auth fail rather than decide: raw
// bytes, for no HTTP client sends a bad escape.
type hostileRequest struct {
	name string
	head func(host, path string) []byte // the request for path, a path under /api/<case>/
	path string                         // its path, %d the request's number
}

// headWith is a request of method for path on host as curl sends it, with fields more header
// fields of size bytes in all.
func headWith(method, host, path string, fields, size int) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: curl/8\r\nAccept: */*\r\nConnection: close\r\n", method, path, host)
	per := size / fields
	for i := range fields {
		v := strings.Repeat("v", max(1, per-len("X-P000: \r\n")))
		fmt.Fprintf(&b, "X-P%03d: %s\r\n", i, v)
	}
	b.WriteString("\r\n")
	return b.Bytes()
}

// hostileRequests are those of the hostile-clients table of docs/failure-modes.md.
var hostileRequests = []hostileRequest{
	{"94 headers", func(h, p string) []byte { return headWith("GET", h, p, 94, 94*12) }, "/api/h94/%d"},
	{"150 headers", func(h, p string) []byte { return headWith("GET", h, p, 150, 150*12) }, "/api/h150/%d"},
	{"70 KB of headers", func(h, p string) []byte { return headWith("GET", h, p, 10, 70<<10) }, "/api/h70k/%d"},
	{"a bad escape", func(h, p string) []byte { return headWith("GET", h, p, 3, 100) }, "/api/zz%%zz/%d"},
	{"an odd method", func(h, p string) []byte { return headWith("XYZZY", h, p, 3, 100) }, "/api/odd/%d"},
}

// sendRawFrom writes req to addr from the loopback address ip and returns the status answered
// (0 when the gateway closed the connection without one).
func sendRawFrom(t *testing.T, ip, addr string, req []byte) int {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(15 * time.Second))
	go func() { _, _ = c.Write(req) }()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// fivePerHour is examples/forward-auth.yaml at 5 requests an hour per client, so that none
// of a client's five comes back (one every 12 minutes) during a test.
func fivePerHour(t *testing.T, dir string) string {
	t.Helper()
	return fromExample(t, forwardAuthConfig, dir, "period: 1m", "period: 1h")
}

// eightOfEach sends eight of each hostile request through the gateway at base, each kind from
// a client of its own, and checks that at most the limit's five reach the API and that the
// client gets no 431 and no 5xx.
func eightOfEach(t *testing.T, base string, up *rawAPI, requests []hostileRequest) {
	t.Helper()
	addr := strings.TrimPrefix(base, "http://")
	for k, h := range requests {
		client := fmt.Sprintf("127.0.0.%d", 20+k)
		var codes []int
		for i := range 8 {
			code := sendRawFrom(t, client, addr, h.head(addr, fmt.Sprintf(h.path, i)))
			codes = append(codes, code)
			// rl-exporter's answer reaches the client as it is through Caddy: never one outside
			// a gateway's contract (nginx's own 400s for heads it refuses are not rl-exporter's).
			if code == http.StatusRequestHeaderFieldsTooLarge || code >= 500 || code == 0 {
				t.Errorf("%s, request %d: status %d at the client, want a decision or a refusal", h.name, i+1, code)
			}
		}
		prefix := h.path[:strings.LastIndexByte(h.path, '/')+1]
		prefix = strings.ReplaceAll(prefix, "%%", "%")
		if n := up.reached(prefix); n > 5 {
			t.Errorf("%s: %d of 8 reached the API (answers %v), want at most the limit's 5", h.name, n, codes)
		} else {
			t.Logf("%s: %d of 8 reached the API, answers %v", h.name, n, codes)
		}
	}
}

// Whatever headers, escapes or method a client sends through the nginx example, at most the
// limit's requests reach the API: nothing a client shapes makes /v1/auth answer outside
// auth_request's contract (2xx, 401, 403), which nginx would take as the limiter's failure.
func TestNginxLetsNoHostileRequestPastTheLimit(t *testing.T) {
	run, errLog := runNginx(t)
	up := newRawAPI(t)
	dir := t.TempDir()
	base, rl := serveBehindGateway(t, fivePerHour(t, dir), up.addr(), nginxConf, nginxListenOld, nginxListen, run)
	eightOfEach(t, base, up, hostileRequests)
	if b, _ := os.ReadFile(*errLog); strings.Contains(string(b), "auth request unexpected status") {
		t.Errorf("nginx took an answer of /v1/auth as a failure:\n%s", b)
	}
	if n := metricSum(t, rl, "rate_limit_auth_denied_total", "reason"); n != 0 {
		t.Errorf("rate_limit_auth_denied_total %v, want 0: nginx sends /v1/auth only the headers it reads", n)
	}
}

// The same through nginx configured to forward every header of the client to /v1/auth, with
// heads of up to 8 × 256 KiB: rl-exporter reads heads of up to 1 MiB from a gateway and
// refuses one past its bounds with the gateway's deny status, never net/http's 431.
func TestNginxForwardingEveryClientHeaderLetsNoHostileRequestPastTheLimit(t *testing.T) {
	nginx, errLog := runNginx(t)
	run := func(dir, conf string) {
		editFile(t, conf, "proxy_pass_request_headers off;   # only the headers set below", "proxy_pass_request_headers on;")
		nginx(dir, conf)
	}
	up := newRawAPI(t)
	dir := t.TempDir()
	listen := func(a string) string { return nginxListen(a) + "\n    large_client_header_buffers 8 256k;" }
	base, rl := serveBehindGateway(t, fivePerHour(t, dir), up.addr(), nginxConf, nginxListenOld, listen, run)
	large := hostileRequest{"300 KB of headers", func(h, p string) []byte { return headWith("GET", h, p, 12, 300<<10) }, "/api/h300k/%d"}
	eightOfEach(t, base, up, append([]hostileRequest{large}, hostileRequests...))
	if b, _ := os.ReadFile(*errLog); strings.Contains(string(b), "auth request unexpected status") {
		t.Errorf("nginx took an answer of /v1/auth as a failure:\n%s", b)
	}
	if n := metricSum(t, rl, "rate_limit_auth_denied_total", `reason="request_too_large"`); n != 16 {
		t.Errorf(`rate_limit_auth_denied_total{reason="request_too_large"} %v, want the 16 of 94 and 150 headers, past 100 fields with nginx's own`, n)
	}
}

// Caddy's forward_auth passes any answer but a 2xx to the client as it is, so nothing a client
// shapes lets a request past: the test holds the example to that.
func TestCaddyLetsNoHostileRequestPastTheLimit(t *testing.T) {
	up := newRawAPI(t)
	dir := t.TempDir()
	base, _ := serveBehindGateway(t, fivePerHour(t, dir), up.addr(), caddyConf, caddyListenOld, caddyListen, runCaddy(t))
	eightOfEach(t, base, up, hostileRequests)
}

// A gateway's test stops the gateway's whole process group: nginx's master and every worker
// are gone, and nothing accepts on its port, once the test that started them ends.
func TestNginxStopsWithEveryWorkerWhenItsTestEnds(t *testing.T) {
	var master int
	var workers []int
	var listen string
	t.Run("nginx with two workers", func(t *testing.T) {
		nginx := gateway(t, "nginx")
		dir := t.TempDir()
		listen = freeAddr(t)
		conf := fromExample(t, nginxConf, dir, nginxListenOld, nginxListen(listen), "worker_processes auto;", "worker_processes 2;",
			"error_log stderr warn;", "error_log "+filepath.Join(dir, "error.log")+" warn;")
		master = start(t, dir, "nginx", nginx, "-p", dir+"/", "-e", filepath.Join(dir, "error.log"), "-c", filepath.Base(conf))
		if !eventually.Within(10*time.Second, func() bool { workers = children(master); return len(workers) == 2 }) {
			t.Fatalf("nginx %d has the workers %v, want 2", master, workers)
		}
		waitListening(t.Context(), t, listen)
	})
	for _, pid := range append([]int{master}, workers...) {
		if !eventually.Within(5*time.Second, func() bool { return !alive(pid) }) {
			t.Errorf("after its test, nginx's process %d (master %d, workers %v) still runs", pid, master, workers)
		}
	}
	if c, err := net.DialTimeout("tcp", listen, time.Second); err == nil {
		c.Close()
		t.Errorf("after its test, something still accepts on nginx's %s", listen)
	}
}

// Behind the nginx example, only an rl-exporter nginx cannot reach lets a request through
// unchecked (fail open); any other answer outside auth_request's contract (a 500, a 431) is a
// 503 that never reaches the API.
func TestNginxLetsRequestsThroughOnlyWhenRlExporterIsUnreachable(t *testing.T) {
	run, _ := runNginx(t)
	for _, c := range []struct {
		name    string
		status  int // what the stand-in for rl-exporter answers; 0: nothing listens
		want    int
		reaches bool
	}{
		{"unreachable", 0, http.StatusOK, true},
		{"answering 500", http.StatusInternalServerError, http.StatusServiceUnavailable, false},
		{"answering 431", http.StatusRequestHeaderFieldsTooLarge, http.StatusServiceUnavailable, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			rl := freeAddr(t)
			if c.status != 0 {
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(c.status) }))
				t.Cleanup(srv.Close)
				rl = strings.TrimPrefix(srv.URL, "http://")
			}
			up := newAPI(t)
			dir := t.TempDir()
			listen := freeAddr(t)
			conf := fromExample(t, nginxConf, dir, exampleRL, rl, exampleAPI, up.addr(), nginxListenOld, nginxListen(listen))
			run(dir, conf)
			waitListening(t.Context(), t, listen)
			a := send(t, clientFrom("127.0.0.2"), "GET", "http://"+listen+"/api/x", nil)
			if a.code != c.want || (up.count("/api/x") == 1) != c.reaches {
				t.Errorf("status %d %q, the API saw it %d times; want %d and reached %v", a.code, a.body, up.count("/api/x"), c.want, c.reaches)
			}
		})
	}
}
