package server_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/httplimit"
	"github.com/rl-exporter/rl-exporter/internal/eventually"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/server"
)

// countingListener counts the connections its server accepts.
type countingListener struct {
	net.Listener
	accepted atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepted.Add(1)
	}
	return c, err
}

// startProxy runs a Server in front of upstream, with a limit no test
// reaches, and returns its main listener's base URL.
func startProxy(t *testing.T, upstream string, tc server.TransportConfig) string {
	t.Helper()
	u, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Listen: "127.0.0.1:0", Upstream: u, UpstreamTransport: tc, Middleware: testMiddleware(t)})
	if err != nil {
		t.Fatal(err)
	}
	return runServer(t, srv)
}

// runServer serves srv until the test ends and returns its main listener's base URL.
func runServer(t testing.TB, srv *server.Server) string {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return "http://" + srv.Addr("main")
}

// load sends requests from clients concurrent clients, each on a
// keep-alive connection of its own, and fails the test on any error or
// status other than 200. It returns the bodies' total length.
func load(t *testing.T, base string, clients, perClient int) int64 {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}, Timeout: 10 * time.Second}
	defer c.CloseIdleConnections()
	var wg sync.WaitGroup
	var total atomic.Int64
	errs := make(chan error, clients)
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range perClient {
				resp, err := c.Get(base + "/hello")
				if err != nil {
					errs <- err
					return
				}
				n, _ := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					errs <- &statusError{resp.StatusCode}
					return
				}
				total.Add(n)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("request through the proxy: %v", err)
	}
	return total.Load()
}

type statusError struct{ code int }

func (e *statusError) Error() string { return "status " + http.StatusText(e.code) }

func TestTheProxyReusesUpstreamConnectionsUnderSteadyLoad(t *testing.T) {
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "hello\n")
	}))
	ln := &countingListener{Listener: up.Listener}
	up.Listener = ln
	up.Start()
	defer up.Close()

	const clients, perClient = 32, 50
	base := startProxy(t, up.URL, server.TransportConfig{})
	load(t, base, clients, perClient)
	// About one connection per request in flight at once (a request that
	// starts while a finished one's connection is on its way back to the
	// idle pool may open another); Go's default transport, which keeps two
	// idle, opened one for most requests.
	if got := ln.accepted.Load(); got > 2*clients {
		t.Errorf("the upstream accepted %d connections for %d requests from %d concurrent clients; want at most %d (connections reused)",
			got, clients*perClient, clients, 2*clients)
	}
}

func TestTheProxySpeaksH2CToAnUpstreamWhenConfigured(t *testing.T) {
	var h1 atomic.Int64
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != 2 {
			h1.Add(1)
		}
		_, _ = io.WriteString(w, "hello\n")
	}))
	up.Config.Protocols = new(http.Protocols)
	up.Config.Protocols.SetHTTP1(true)
	up.Config.Protocols.SetUnencryptedHTTP2(true)
	ln := &countingListener{Listener: up.Listener}
	up.Listener = ln
	up.Start()
	defer up.Close()

	base := startProxy(t, up.URL, server.TransportConfig{H2C: true})
	// One request first: requests that arrive together before any h2c
	// connection exists may each dial one.
	load(t, base, 1, 1)
	const clients = 32
	load(t, base, clients, 20)
	if n := h1.Load(); n != 0 {
		t.Errorf("%d requests reached the upstream over HTTP/1; want all over h2c", n)
	}
	// Multiplexed on the connection already open.
	if got := ln.accepted.Load(); got > 2 {
		t.Errorf("the upstream accepted %d h2c connections for %d concurrent clients after the first request; want them multiplexed on one or two", got, clients)
	}
}

func TestLargeBodiesPassThroughThePooledCopyBuffersIntact(t *testing.T) {
	body := bytes.Repeat([]byte("0123456789abcdef"), 20_000) // 320 kB, ten copy buffers
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ := io.ReadAll(r.Body)
		if !bytes.Equal(got, body) {
			http.Error(w, "request body changed on the way", http.StatusBadRequest)
			return
		}
		_, _ = w.Write(body)
	}))
	defer up.Close()
	base := startProxy(t, up.URL, server.TransportConfig{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Post(base+"/upload", "application/octet-stream", bytes.NewReader(body))
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			got, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK || !bytes.Equal(got, body) {
				t.Errorf("status %d, %d bytes back; want 200 and the %d bytes sent", resp.StatusCode, len(got), len(body))
			}
		}()
	}
	wg.Wait()
}

func TestASlowUpstreamGets502AfterTheResponseHeaderTimeout(t *testing.T) {
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer up.Close()
	defer close(release)
	base := startProxy(t, up.URL, server.TransportConfig{ResponseHeaderTimeout: 200 * time.Millisecond})
	start := time.Now()
	resp, err := http.Get(base + "/slow")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway {
		t.Errorf("status %d from an upstream that never answers; want 502", resp.StatusCode)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("the 502 came after %s; want soon after the 200ms response header timeout", el)
	}
}

func TestIdleUpstreamConnectionsCloseWhenServeStops(t *testing.T) {
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
	u, _ := url.Parse(up.URL)
	p, err := httplimit.NewPolicy(httplimit.PolicyConfig{Store: limiter.NewMemoryStore(limiter.MemoryConfig{})})
	if err != nil {
		t.Fatal(err)
	}
	mw, _ := httplimit.New(httplimit.Config{Policy: p})
	srv, err := server.New(server.Config{Listen: "127.0.0.1:0", Upstream: u, Middleware: mw})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	load(t, "http://"+srv.Addr("main"), 4, 5)
	if open.Load() == 0 {
		t.Fatal("no upstream connection open after the requests: the proxy keeps none for reuse")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	eventually.True(t, 5*time.Second, "the upstream connections closed after serve stopped", func() bool { return open.Load() == 0 })
	if n := open.Load(); n != 0 {
		t.Errorf("%d upstream connections still open after serve stopped; want them closed", n)
	}
}
