package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"strings"
	"sync"
	"time"
)

// directTransport is the reverse proxy's RoundTripper to a plain http://
// upstream. A request without a body is written, and its response read, on
// the calling goroutine over a kept-alive HTTP/1.1 connection taken from a
// pool of idle ones: no goroutine per connection and no hand-off between
// goroutines per request, which is what http.Transport spends most of its
// time on in front of a fast upstream. Everything else — requests with a
// body, upgrades, Expect: 100-continue, another host — goes through
// fallback, an http.Transport with the same settings.
//
// Requests and responses are written and parsed by net/http itself
// (Request.Write, http.ReadResponse); this type only keeps the
// connections. A directTransport is safe for concurrent use.
type directTransport struct {
	host          string // the upstream's URL.Host, which requests carry
	addr          string // host:port dialled
	dial          func(ctx context.Context, network, addr string) (net.Conn, error)
	fallback      *http.Transport
	maxIdle       int
	idleTimeout   time.Duration
	headerTimeout time.Duration // 0: no bound

	mu    sync.Mutex
	idle  []*upstreamConn // most recently used last
	sweep *time.Timer     // closes connections idle too long; nil when idle is empty
}

// newDirectTransport returns a directTransport to the upstream host (a
// URL's Host, the port 80 when it has none) with cfg's settings, falling
// back to fallback.
func newDirectTransport(host string, cfg TransportConfig, fallback *http.Transport) *directTransport {
	cfg = cfg.withDefaults()
	addr := host
	if _, _, err := net.SplitHostPort(host); err != nil {
		addr = net.JoinHostPort(strings.Trim(host, "[]"), "80")
	}
	dialer := &net.Dialer{Timeout: cfg.DialTimeout, KeepAlive: 30 * time.Second}
	return &directTransport{
		host: host, addr: addr, dial: dialer.DialContext, fallback: fallback,
		maxIdle: cfg.MaxIdleConnsPerHost, idleTimeout: cfg.IdleConnTimeout,
		headerTimeout: cfg.ResponseHeaderTimeout,
	}
}

// upstreamConn is one connection to the upstream with its buffers.
type upstreamConn struct {
	t         *directTransport
	conn      net.Conn
	br        *bufio.Reader
	bw        *bufio.Writer
	probe     *idleProbe
	idleSince time.Time
	reused    bool // it served a request before this one
}

// handles says whether req can take the direct path.
func (t *directTransport) handles(req *http.Request) bool {
	return req.URL.Scheme == "http" && req.URL.Host == t.host &&
		(req.Body == nil || req.Body == http.NoBody) &&
		req.Header["Upgrade"] == nil && req.Header["Expect"] == nil
}

// RoundTrip implements http.RoundTripper.
func (t *directTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !t.handles(req) {
		return t.fallback.RoundTrip(req)
	}
	for retried := false; ; retried = true {
		pc, err := t.get(req.Context())
		if err != nil {
			return nil, err
		}
		resp, err, unanswered := pc.roundTrip(req)
		if err == nil {
			return resp, nil
		}
		pc.close()
		// An idle connection the upstream closed while it sat in the
		// pool fails before any byte of an answer: try once more on a
		// fresh one when the request can be sent twice, as
		// http.Transport does.
		if retried || !pc.reused || !unanswered || !replayable(req) || req.Context().Err() != nil {
			return nil, err
		}
	}
}

// replayable says whether req may be sent again after a connection
// failed before answering (http.Transport's rule for a request without a
// body).
func replayable(req *http.Request) bool {
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	return req.Header["Idempotency-Key"] != nil || req.Header["X-Idempotency-Key"] != nil
}

// get returns an idle connection, or dials a new one.
func (t *directTransport) get(ctx context.Context) (*upstreamConn, error) {
	t.mu.Lock()
	for n := len(t.idle); n > 0; n = len(t.idle) {
		pc := t.idle[n-1]
		t.idle[n-1] = nil
		t.idle = t.idle[:n-1]
		if time.Since(pc.idleSince) >= t.idleTimeout {
			_ = pc.conn.Close()
			continue
		}
		t.mu.Unlock()
		if pc.probe.stillOpen() {
			pc.reused = true
			return pc, nil
		}
		_ = pc.conn.Close()
		t.mu.Lock()
	}
	t.mu.Unlock()
	conn, err := t.dial(ctx, "tcp", t.addr)
	if err != nil {
		return nil, fmt.Errorf("dial upstream %s: %w", t.addr, err)
	}
	return &upstreamConn{t: t, conn: conn, br: bufio.NewReader(conn), bw: bufio.NewWriter(conn), probe: newIdleProbe(conn)}, nil
}

// put returns pc to the idle pool, or closes it when the pool is full.
func (t *directTransport) put(pc *upstreamConn) {
	pc.idleSince = time.Now()
	t.mu.Lock()
	if len(t.idle) >= t.maxIdle {
		t.mu.Unlock()
		pc.close()
		return
	}
	t.idle = append(t.idle, pc)
	if t.sweep == nil {
		t.sweep = time.AfterFunc(t.idleTimeout, t.closeStale)
	}
	t.mu.Unlock()
}

// closeStale closes the connections idle for IdleConnTimeout and comes
// back for the others.
func (t *directTransport) closeStale() {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	n := 0
	for n < len(t.idle) && now.Sub(t.idle[n].idleSince) >= t.idleTimeout {
		_ = t.idle[n].conn.Close()
		n++
	}
	t.idle = append(t.idle[:0], t.idle[n:]...)
	clear(t.idle[len(t.idle):cap(t.idle)])
	if len(t.idle) == 0 {
		t.sweep = nil
		return
	}
	t.sweep.Reset(t.idleTimeout - now.Sub(t.idle[0].idleSince))
}

// CloseIdleConnections closes the idle connections of both paths.
func (t *directTransport) CloseIdleConnections() {
	t.mu.Lock()
	for _, pc := range t.idle {
		_ = pc.conn.Close()
	}
	clear(t.idle)
	t.idle = t.idle[:0]
	if t.sweep != nil {
		t.sweep.Stop()
		t.sweep = nil
	}
	t.mu.Unlock()
	t.fallback.CloseIdleConnections()
}

func (pc *upstreamConn) close() { _ = pc.conn.Close() }

// aLongTimeAgo is a deadline in the past, which makes a blocked read or
// write return at once.
var aLongTimeAgo = time.Unix(1, 0)

// roundTrip writes req and reads its response. unanswered is true when an
// error came before any byte of the response.
func (pc *upstreamConn) roundTrip(req *http.Request) (resp *http.Response, err error, unanswered bool) {
	ctx := req.Context()
	// The client going away (or the server shutting down) aborts the
	// exchange: reads and writes on the connection return at once.
	stop := context.AfterFunc(ctx, func() { _ = pc.conn.SetDeadline(aLongTimeAgo) })
	fail := func(err error, unanswered bool) (*http.Response, error, bool) {
		stop()
		if cerr := ctx.Err(); cerr != nil {
			return nil, cerr, false
		}
		return nil, err, unanswered
	}
	if err := req.Write(pc.bw); err != nil {
		return fail(err, true)
	}
	if err := pc.bw.Flush(); err != nil {
		return fail(err, true)
	}
	if pc.t.headerTimeout > 0 {
		_ = pc.conn.SetReadDeadline(time.Now().Add(pc.t.headerTimeout))
	}
	for {
		if _, err := pc.br.Peek(1); err != nil {
			if isTimeout(err) && ctx.Err() == nil {
				err = errors.New("timeout awaiting response headers")
				return fail(err, false)
			}
			return fail(err, true)
		}
		resp, err = http.ReadResponse(pc.br, req)
		if err != nil {
			if isTimeout(err) && ctx.Err() == nil {
				err = errors.New("timeout awaiting response headers")
			}
			return fail(err, false)
		}
		// Informational answers (103 Early Hints) are passed to the
		// trace the reverse proxy forwards them with; the final one
		// follows.
		if resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
			if trace := httptrace.ContextClientTrace(ctx); trace != nil && trace.Got1xxResponse != nil {
				if err := trace.Got1xxResponse(resp.StatusCode, textproto.MIMEHeader(resp.Header)); err != nil {
					return fail(err, false)
				}
			}
			continue
		}
		break
	}
	if pc.t.headerTimeout > 0 {
		_ = pc.conn.SetReadDeadline(time.Time{})
	}
	reusable := !resp.Close && !req.Close && resp.StatusCode != http.StatusSwitchingProtocols
	if resp.Body == http.NoBody {
		pc.release(stop, reusable)
		return resp, nil, false
	}
	resp.Body = &upstreamBody{pc: pc, body: resp.Body, stop: stop, reusable: reusable}
	return resp, nil, false
}

// release ends an exchange: the connection goes back to the pool when it
// may carry another request, else it is closed.
func (pc *upstreamConn) release(stop func() bool, reusable bool) {
	if stop() && reusable && pc.br.Buffered() == 0 {
		pc.t.put(pc)
		return
	}
	pc.close()
}

// upstreamBody is a response body read from an upstreamConn: read to its
// end, it gives the connection back to the pool; closed before, it closes
// the connection (the rest of the body is not worth reading). Read and
// Close are called from one goroutine, as the reverse proxy does.
type upstreamBody struct {
	pc       *upstreamConn
	body     io.ReadCloser
	stop     func() bool
	reusable bool
	done     bool
}

// Read implements io.Reader.
func (b *upstreamBody) Read(p []byte) (int, error) {
	if b.done {
		return 0, io.EOF
	}
	n, err := b.body.Read(p)
	if err == io.EOF {
		b.done = true
		b.pc.release(b.stop, b.reusable)
	}
	return n, err
}

// Close implements io.Closer.
func (b *upstreamBody) Close() error {
	if !b.done {
		b.done = true
		b.stop()
		b.pc.close()
	}
	return nil
}
