package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rl-exporter/rl-exporter/httplimit"
	"github.com/rl-exporter/rl-exporter/internal/eventually"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/server"
)

// startServer runs a Server built from cfg (Listen, Middleware filled in
// when empty: a limit no test reaches) until the test ends.
func startServer(t *testing.T, cfg server.Config) *server.Server {
	t.Helper()
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	if cfg.Middleware == nil {
		cfg.Middleware = testMiddleware(t)
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return srv
}

// testMiddleware is a middleware with a limit no test reaches, sending
// the default rate-limit headers.
func testMiddleware(t *testing.T) *httplimit.Middleware {
	t.Helper()
	p, err := httplimit.NewPolicy(httplimit.PolicyConfig{
		Store: limiter.NewMemoryStore(limiter.MemoryConfig{}),
		Classes: []httplimit.Class{{Name: "default", Limits: map[string]limiter.Limit{
			"default": limiter.PerSecond(limiter.GCRA, 1_000_000),
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	mw, err := httplimit.New(httplimit.Config{Policy: p})
	if err != nil {
		t.Fatal(err)
	}
	return mw
}

// readingUpstream reads every request body in full and answers 200, after
// delay.
func readingUpstream(t *testing.T, delay time.Duration) *url.URL {
	t.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		// The upstream's own work, which the proxy waits out, unless the
		// proxy gives the request up first.
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
		fmt.Fprintf(w, "upstream read %d bytes\n", n)
	}))
	t.Cleanup(up.Close)
	u, _ := url.Parse(up.URL)
	return u
}

// trickle opens a connection, sends head, then one byte of body a second
// until the server closes the connection or stop is closed. It returns how
// long the connection stayed open.
func trickle(addr, head string, stop <-chan struct{}) (time.Duration, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	start := time.Now()
	if _, err := io.WriteString(c, head); err != nil {
		return 0, err
	}
	closed := make(chan struct{})
	go func() {
		// Whatever the server answers, the connection ends with EOF or a reset.
		_, _ = io.Copy(io.Discard, c)
		close(closed)
	}()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-closed:
			return time.Since(start), nil
		case <-stop:
			return time.Since(start), errors.New("still open when the test stopped sending")
		case <-tick.C:
			_, _ = c.Write([]byte("x"))
		}
	}
}

func TestClientsTricklingABodyAreCutOffWithinTheReadTimeout(t *testing.T) {
	const readTimeout = time.Second
	srv := startServer(t, server.Config{Upstream: readingUpstream(t, 0), ReadTimeout: readTimeout})
	addr := srv.Addr("main")
	heads := map[string]string{
		"the proxy":        "POST /upload HTTP/1.1\r\nHost: api\r\nContent-Length: 1000\r\n\r\n",
		"the decision API": "POST " + httplimit.CheckPath + " HTTP/1.1\r\nHost: api\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"key\":",
	}
	const perPath = 250 // 500 connections in all
	stop := make(chan struct{})
	time.AfterFunc(10*time.Second, func() { close(stop) })
	var wg sync.WaitGroup
	var mu sync.Mutex
	worst := map[string]time.Duration{}
	for path, head := range heads {
		for range perPath {
			wg.Add(1)
			go func() {
				defer wg.Done()
				open, err := trickle(addr, head, stop)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					t.Errorf("%s: %v after %s", path, err, open)
				}
				worst[path] = max(worst[path], open)
			}()
		}
	}
	wg.Wait()
	for path, d := range worst {
		t.Logf("%s: %d connections sending a byte a second, the last closed after %s (read_timeout %s)", path, perPath, d.Round(time.Millisecond), readTimeout)
		// A tick of the trickle and scheduling on a loaded machine as slack.
		if d > readTimeout+2*time.Second {
			t.Errorf("%s: a slow client held its connection for %s, want at most read_timeout %s (+2s slack)", path, d, readTimeout)
		}
	}
	if got := srv.SlowClients("main"); got != 2*perPath {
		t.Errorf("%d slow clients counted, want %d", got, 2*perPath)
	}
	if got := testutil.ToFloat64(metricOf(t, srv, "rate_limit_slow_clients_total", "main")); got != 2*perPath {
		t.Errorf(`rate_limit_slow_clients_total{listener="main"} %g, want %d`, got, 2*perPath)
	}
}

// metricOf is the counter name of one listener from srv.Metrics().
func metricOf(t *testing.T, srv *server.Server, name, listener string) prometheus.Collector {
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
				if l.GetName() == "listener" && l.GetValue() == listener {
					c := prometheus.NewCounter(prometheus.CounterOpts{Name: f.GetName()})
					c.Add(m.GetCounter().GetValue())
					return c
				}
			}
		}
	}
	t.Fatalf("no %s{listener=%q} in the server metrics", name, listener)
	return nil
}

func TestSlowHeadersAreCutOffAndCountedButAnIdleConnectionIsNot(t *testing.T) {
	srv := startServer(t, server.Config{Upstream: readingUpstream(t, 0), ReadHeaderTimeout: time.Second, ReadTimeout: 5 * time.Second})
	addr := srv.Addr("main")
	stop := make(chan struct{})
	time.AfterFunc(8*time.Second, func() { close(stop) })
	open, err := trickle(addr, "GET / HTTP/1.1\r\nHost: api\r\nX-Slow: ", stop)
	t.Logf("headers sent at a byte a second: closed after %s (read_header_timeout 1s)", open.Round(time.Millisecond))
	if err != nil || open > 3*time.Second {
		t.Errorf("headers sent a byte a second: open %s (%v), want closed within read_header_timeout 1s (+2s slack)", open, err)
	}
	// A connection opened ahead of need, sending nothing, is closed too,
	// but is not a slow client.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("a silent connection: read %v, want EOF (closed by the server)", err)
	}
	if got := srv.SlowClients("main"); got != 1 {
		t.Errorf("%d slow clients counted, want 1 (the trickled headers, not the silent connection)", got)
	}
}

func TestARequestSlowerThanTheReadTimeoutIsNotCutOffOnceItsBodyIsRead(t *testing.T) {
	// The upstream answers after 2s, twice the read timeout: the body was
	// read at once, so nothing may cut the request off.
	srv := startServer(t, server.Config{Upstream: readingUpstream(t, 2*time.Second), ReadTimeout: time.Second})
	for _, method := range []string{"GET", "POST"} {
		req, _ := http.NewRequest(method, "http://"+srv.Addr("main")+"/slow", strings.NewReader(strings.Repeat("b", 100)))
		if method == "GET" {
			req.Body, req.ContentLength = nil, 0
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("%s to an upstream slower than the read timeout: %d %s, want 200", method, resp.StatusCode, body)
		}
	}
	// And the connection kept alive then is closed after the idle timeout only.
	if got := srv.SlowClients("main"); got != 0 {
		t.Errorf("%d slow clients counted, want 0", got)
	}
}

func TestAnIdleKeptAliveConnectionIsClosedAfterTheIdleTimeout(t *testing.T) {
	srv := startServer(t, server.Config{Upstream: readingUpstream(t, 0), IdleTimeout: time.Second})
	c, err := net.Dial("tcp", srv.Addr("main"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: api\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	start := time.Now()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		t.Fatalf("idle connection: %v, want EOF", err)
	}
	if idle := time.Since(start); idle < 900*time.Millisecond || idle > 3*time.Second {
		t.Errorf("an idle connection was closed after %s, want about the idle timeout 1s", idle)
	}
	if got := srv.SlowClients("main"); got != 0 {
		t.Errorf("an idle connection counted as %d slow clients, want 0", got)
	}
}

func TestAMalformedChunkedBodyIs400OnTheProxyAndTheDecisionAPI(t *testing.T) {
	srv := startServer(t, server.Config{Upstream: readingUpstream(t, 0)})
	for _, path := range []string{"/upload", httplimit.CheckPath} {
		for name, chunk := range map[string]string{
			"an overflowing chunk size":    "fffffffffffffffffffffffff\r\nabc\r\n0\r\n\r\n",
			"a chunk size that is not hex": "zz\r\nabc\r\n0\r\n\r\n",
		} {
			c, err := net.Dial("tcp", srv.Addr("main"))
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.WriteString(c, "POST "+path+" HTTP/1.1\r\nHost: api\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"+chunk)
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatalf("%s, %s: %v", path, name, err)
			}
			body, _ := io.ReadAll(resp.Body)
			c.Close()
			if resp.StatusCode != 400 {
				t.Errorf("%s, %s: %d %s, want 400", path, name, resp.StatusCode, body)
			}
		}
	}
}

// storeSwitch is a store readiness check the test turns down and up.
type storeSwitch struct{ down atomic.Bool }

func (s *storeSwitch) ping(context.Context) error {
	if s.down.Load() {
		return errors.New("dial tcp 127.0.0.1:1: connection refused")
	}
	return nil
}

func TestReadyzStaysReadyWhileTheFailPolicyStillDecides(t *testing.T) {
	cases := []struct {
		name       string
		failPolicy string
		strict     bool
		wantDown   int // status while the store is down
	}{
		{"fail open", "open", false, 200},
		{"fail local", "local", false, 200},
		{"fail closed: every decision would fail", "closed", false, 503},
		{"fail open but ready_strict", "open", true, 503},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := &storeSwitch{}
			// The store's state is reused for ReadyTimeout: a short one,
			// and /readyz is asked until it has seen the change.
			srv := startServer(t, server.Config{Ready: st.ping, ReadyTimeout: 20 * time.Millisecond, FailPolicy: c.failPolicy, ReadyStrict: c.strict})
			check := func(wantStatus int, wantStore string) {
				t.Helper()
				var status int
				var rd server.Readiness
				eventually.Within(5*time.Second, func() bool {
					resp, err := http.Get("http://" + srv.Addr("main") + server.ReadyPath)
					if err != nil {
						t.Fatal(err)
					}
					rd = server.Readiness{}
					err = json.NewDecoder(resp.Body).Decode(&rd)
					resp.Body.Close()
					if err != nil {
						t.Fatalf("body: %v", err)
					}
					status = resp.StatusCode
					return rd.Store == wantStore
				})
				if status != wantStatus || rd.Ready != (wantStatus == 200) || rd.Store != wantStore || rd.FailPolicy != c.failPolicy || rd.Strict != c.strict {
					t.Errorf("status %d %+v, want %d, ready %v, store %s, fail_policy %s, strict %v",
						status, rd, wantStatus, wantStatus == 200, wantStore, c.failPolicy, c.strict)
				}
				// The store's address and error are for the log alone.
				if wantStore == "down" && rd.Reason != "store unavailable" {
					t.Errorf("reason %q, want %q", rd.Reason, "store unavailable")
				}
			}
			check(200, "up")
			st.down.Store(true)
			check(c.wantDown, "down")
			st.down.Store(false)
			check(200, "up")
		})
	}
}
