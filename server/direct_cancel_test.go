package server

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/proxy"
)

// The direct path's exchange ends when its request's context does, whoever
// cancels it: net/http when the client's connection fails, a handler in
// between that gave the context a cancellation of its own, or a caller
// outside net/http.

// blockingUpstream answers nothing until its request's context ends, which it
// reports on cancelled; arrived gets each request as it comes.
func blockingUpstream(t *testing.T) (u *url.URL, arrived, cancelled chan struct{}) {
	t.Helper()
	arrived, cancelled = make(chan struct{}, 1), make(chan struct{}, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		select {
		case <-r.Context().Done():
			cancelled <- struct{}{}
		case <-time.After(10 * time.Second):
		}
	}))
	t.Cleanup(up.Close)
	u, err := url.Parse(up.URL)
	if err != nil {
		t.Fatal(err)
	}
	return u, arrived, cancelled
}

// testDirectProxy is the proxy to u (on the direct path, where the platform has
// it), its errors sent to errs.
func testDirectProxy(t *testing.T, u *url.URL, errs chan<- error) *proxy.Proxy {
	t.Helper()
	p, err := proxy.New(proxy.Config{Upstream: u, ErrorHandler: func(_ http.ResponseWriter, _ *http.Request, err error) { errs <- err }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: not within 5s", what)
	}
}

// serveOnSlowClientConns serves h as serve's listeners do, on slowClientConns.
func serveOnSlowClientConns(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var slow, oversized atomic.Uint64
	srv := &http.Server{
		Handler:   h,
		ConnState: slowClientConnState,
	}
	go func() { _ = srv.Serve(&slowClientListener{Listener: ln, slow: &slow, oversized: &oversized}) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

func TestAHandlersOwnCancellationStopsTheUpstreamExchange(t *testing.T) {
	u, arrived, cancelled := blockingUpstream(t)
	errs := make(chan error, 1)
	p := testDirectProxy(t, u, errs)
	addr := serveOnSlowClientConns(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A handler cancelling the request itself, its client still there.
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		go func() {
			<-arrived
			cancel()
		}()
		p.ServeHTTP(w, r.WithContext(ctx))
	}))
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, _ = io.WriteString(conn, "GET /slow HTTP/1.1\r\nHost: test\r\n\r\n")
	waitFor(t, cancelled, "the upstream's request cancelled after the handler cancelled its context")
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Errorf("error %v; want context.Canceled", err)
	}
}

func TestAClientGoingAwayStopsAnExchangeUnderAContextWithValues(t *testing.T) {
	u, arrived, cancelled := blockingUpstream(t)
	errs := make(chan error, 1)
	p := testDirectProxy(t, u, errs)
	type key struct{}
	addr := serveOnSlowClientConns(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r = r.WithContext(context.WithValue(r.Context(), key{}, "a value"))
		p.ServeHTTP(w, r)
	}))
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.WriteString(conn, "GET /slow HTTP/1.1\r\nHost: test\r\n\r\n")
	waitFor(t, arrived, "the request at the upstream")
	conn.Close()
	waitFor(t, cancelled, "the upstream's request cancelled after its client went away")
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Errorf("error %v; want context.Canceled", err)
	}
}

func TestARequestFromOutsideNetHTTPIsWatchedOnItsContext(t *testing.T) {
	u, arrived, cancelled := blockingUpstream(t)
	errs := make(chan error, 1)
	p := testDirectProxy(t, u, errs)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := httptest.NewRequestWithContext(ctx, http.MethodGet, "http://test/slow", nil)
	r.RemoteAddr = "10.0.0.1:1234"
	go func() {
		<-arrived
		cancel()
	}()
	p.ServeHTTP(httptest.NewRecorder(), r)
	waitFor(t, cancelled, "the upstream's request cancelled after its context")
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Errorf("error %v; want context.Canceled", err)
	}
}
