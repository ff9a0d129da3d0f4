package proxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The direct path: in front of a fast upstream, a proxied request costs mostly
// the proxy's machinery (http.Transport's two goroutines per connection,
// ReverseProxy's clones and sorted header writes). So a request without a body
// to a plain http:// upstream is written straight from the incoming request on
// the handler's goroutine, over a kept-alive connection of upstreamPool, and
// answered as ReverseProxy would; everything else goes through ReverseProxy.

// directProxy forwards the requests it can (handles), passes the others
// to fallback. Safe for concurrent use.
type directProxy struct {
	pool     *upstreamPool
	fallback http.Handler
	onError  func(w http.ResponseWriter, r *http.Request, err error)
	buffers  *bufferPool
}

// directPathFor says whether requests to upstream can take the direct path: a plain
// http:// URL with no path beyond "/", on a platform that can check idle connections.
func directPathFor(upstream *url.URL, cfg TransportConfig) bool {
	return directPath && upstream.Scheme == "http" && !cfg.H2C &&
		(upstream.Path == "" || upstream.Path == "/") && upstream.RawQuery == "" && upstream.User == nil
}

// handles says whether r can take the direct path.
func (p *directProxy) handles(r *http.Request) bool {
	return (r.Body == nil || r.Body == http.NoBody) && r.ProtoMajor == 1 &&
		r.Header["Upgrade"] == nil && r.Header["Expect"] == nil && r.Method != http.MethodConnect
}

// ServeHTTP implements http.Handler.
func (p *directProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !p.handles(r) {
		p.fallback.ServeHTTP(w, r)
		return
	}
	resp, err := p.pool.roundTrip(r, w)
	if err != nil {
		p.onError(w, r, err)
		return
	}
	h := w.Header()
	dropped := connectionTokens(resp.Header)
	for k, vv := range resp.Header {
		if !hopByHop(k) && !hasToken(dropped, k) && !setByLimiter(h, k) {
			h[k] = vv
		}
	}
	announced := len(resp.Trailer)
	if announced > 0 {
		// Announced as ReverseProxy does: http.ReadResponse keeps Trailer out of Header.
		keys := make([]string, 0, len(resp.Trailer))
		for k := range resp.Trailer {
			keys = append(keys, k)
		}
		h.Add("Trailer", strings.Join(keys, ", "))
	}
	w.WriteHeader(resp.StatusCode)
	if resp.Body == http.NoBody {
		return
	}
	err = p.copyBody(w, resp)
	resp.Body.Close()
	if err != nil {
		// The client has the status and part of the body: cut the connection so
		// that it cannot take what it got for complete.
		panic(http.ErrAbortHandler)
	}
	if len(resp.Trailer) > 0 {
		_ = http.NewResponseController(w).Flush() // chunked, so trailers can follow
		prefix := ""
		if len(resp.Trailer) != announced {
			prefix = http.TrailerPrefix // some came unannounced
		}
		for k, vv := range resp.Trailer {
			h[prefix+k] = vv
		}
	}
}

// copyBody copies the response body to the client, flushing each write of a stream
// (unknown length) as ReverseProxy does. An error means the body was cut short.
func (p *directProxy) copyBody(w http.ResponseWriter, resp *http.Response) error {
	buf := p.buffers.Get()
	defer p.buffers.Put(buf)
	stream := resp.ContentLength < 0
	var rc *http.ResponseController
	if stream {
		rc = http.NewResponseController(w)
	}
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			if _, err := w.Write(buf[:n]); err != nil {
				return err
			}
			if stream {
				if err := rc.Flush(); err != nil {
					return err
				}
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return rerr
		}
	}
}

// hopByHop says whether a header belongs to one connection and is not
// forwarded (RFC 9110 section 7.6.1, and those ReverseProxy drops).
func hopByHop(k string) bool {
	switch k {
	case "Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
		"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade":
		return true
	}
	return false
}

// connectionTokens returns the Connection header's values, naming more hop-by-hop headers.
func connectionTokens(h http.Header) []string { return h["Connection"] }

// hasToken says whether the comma-separated lists in vs name header k.
func hasToken(vs []string, k string) bool {
	for _, v := range vs {
		for v != "" {
			var tok string
			tok, v, _ = strings.Cut(v, ",")
			if strings.EqualFold(strings.TrimSpace(tok), k) {
				return true
			}
		}
	}
	return false
}

// appendProxied appends r to b as ReverseProxy with SetXForwarded would send it:
// without hop-by-hop headers, the client appended to X-Forwarded-For. net/http
// checked the incoming header names and values when it read them.
func appendProxied(b []byte, r *http.Request, upstreamHost string) []byte {
	b = append(b, r.Method...)
	b = append(b, ' ')
	b = append(b, r.URL.RequestURI()...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	host := r.Host
	if host == "" {
		host = upstreamHost
	}
	b = append(b, host...)
	b = append(b, "\r\n"...)
	dropped := connectionTokens(r.Header)
	for k, vv := range r.Header {
		switch k {
		case "Content-Length", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "Forwarded":
			continue
		case "Te":
			if hasToken(vv, "trailers") {
				b = append(b, "Te: trailers\r\n"...)
			}
			continue
		}
		if hopByHop(k) || (dropped != nil && hasToken(dropped, k)) {
			continue
		}
		for _, v := range vv {
			b = append(b, k...)
			b = append(b, ": "...)
			b = append(b, v...)
			b = append(b, "\r\n"...)
		}
	}
	switch r.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch:
		b = append(b, "Content-Length: 0\r\n"...)
	}
	if client, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		b = append(b, "X-Forwarded-For: "...)
		for _, v := range r.Header["X-Forwarded-For"] {
			b = append(b, v...)
			b = append(b, ", "...)
		}
		b = append(b, client...)
		b = append(b, "\r\n"...)
	}
	b = append(b, "X-Forwarded-Host: "...)
	b = append(b, r.Host...)
	if r.TLS == nil {
		return append(b, "\r\nX-Forwarded-Proto: http\r\n\r\n"...)
	}
	return append(b, "\r\nX-Forwarded-Proto: https\r\n\r\n"...)
}

// upstreamPool keeps idle HTTP/1.1 connections to one upstream and exchanges a
// request and its response on one, on the caller's goroutine. Safe for concurrent use.
type upstreamPool struct {
	host          string // the upstream's URL.Host
	addr          string // host:port dialled
	dial          func(ctx context.Context, network, addr string) (net.Conn, error)
	maxIdle       int
	idleTimeout   time.Duration
	headerTimeout time.Duration // 0: no bound

	mu    sync.Mutex
	idle  []*upstreamConn // most recently used last
	sweep *time.Timer     // closes connections idle too long; nil when idle is empty
}

// newUpstreamPool returns a pool for a URL's Host (port 80 when it has none).
func newUpstreamPool(host string, cfg TransportConfig) *upstreamPool {
	cfg = cfg.withDefaults()
	addr := host
	if _, _, err := net.SplitHostPort(host); err != nil {
		addr = net.JoinHostPort(strings.Trim(host, "[]"), "80")
	}
	dialer := &net.Dialer{Timeout: cfg.DialTimeout, KeepAlive: 30 * time.Second}
	return &upstreamPool{
		host: host, addr: addr, dial: dialer.DialContext,
		maxIdle: cfg.MaxIdleConnsPerHost, idleTimeout: cfg.IdleConnTimeout,
		headerTimeout: cfg.ResponseHeaderTimeout,
	}
}

// upstreamConn is one connection to the upstream; one exchange at a time uses it.
type upstreamConn struct {
	pool      *upstreamPool
	conn      net.Conn
	br        *bufio.Reader
	wbuf      []byte // the request being sent
	probe     *idleProbe
	idleSince time.Time
	reused    bool // it served a request before this one

	// stopAfter stops the context.AfterFunc that aborts the exchange when
	// its request's context ends (the client going away, serve shutting down).
	stopAfter func() bool
	abortFunc func() // pc.abort, made once
	aborted   atomic.Bool
}

// roundTrip sends r (appendProxied) and reads its response, writing 1xx answers to
// w as they come. A replayable request whose reused connection failed before any byte
// of an answer is retried once, as http.Transport does. Read the body to its end or close it.
func (p *upstreamPool) roundTrip(r *http.Request, w http.ResponseWriter) (*http.Response, error) {
	for retried := false; ; retried = true {
		pc, err := p.get(r.Context())
		if err != nil {
			return nil, err
		}
		resp, err, unanswered := pc.exchange(r, w)
		if err == nil {
			return resp, nil
		}
		pc.close()
		if retried || !pc.reused || !unanswered || !replayable(r) || r.Context().Err() != nil {
			return nil, err
		}
	}
}

// replayable says whether r may be sent again after a connection failed
// before answering (http.Transport's rule for a request without a body).
func replayable(r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	return r.Header["Idempotency-Key"] != nil || r.Header["X-Idempotency-Key"] != nil
}

// get returns an idle connection still open, or dials a new one.
func (p *upstreamPool) get(ctx context.Context) (*upstreamConn, error) {
	p.mu.Lock()
	for n := len(p.idle); n > 0; n = len(p.idle) {
		pc := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		if time.Since(pc.idleSince) >= p.idleTimeout {
			pc.close()
			continue
		}
		p.mu.Unlock()
		if pc.probe.stillOpen() {
			pc.reused = true
			return pc, nil
		}
		pc.close()
		p.mu.Lock()
	}
	p.mu.Unlock()
	conn, err := p.dial(ctx, "tcp", p.addr)
	if err != nil {
		return nil, fmt.Errorf("dial upstream %s: %w", p.addr, err)
	}
	pc := &upstreamConn{pool: p, conn: conn, br: bufio.NewReader(conn), probe: newIdleProbe(conn)}
	pc.abortFunc = pc.abort
	return pc, nil
}

// put returns pc to the idle connections, or closes it when there are enough.
func (p *upstreamPool) put(pc *upstreamConn) {
	pc.idleSince = time.Now()
	p.mu.Lock()
	if len(p.idle) >= p.maxIdle {
		p.mu.Unlock()
		pc.close()
		return
	}
	p.idle = append(p.idle, pc)
	if p.sweep == nil {
		p.sweep = time.AfterFunc(p.idleTimeout, p.closeStale)
	}
	p.mu.Unlock()
}

// closeStale closes the connections idle for IdleConnTimeout and rearms for the rest.
func (p *upstreamPool) closeStale() {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	n := 0
	for n < len(p.idle) && now.Sub(p.idle[n].idleSince) >= p.idleTimeout {
		p.idle[n].close()
		n++
	}
	p.idle = append(p.idle[:0], p.idle[n:]...)
	clear(p.idle[len(p.idle):cap(p.idle)])
	if len(p.idle) == 0 {
		p.sweep = nil
		return
	}
	p.sweep.Reset(p.idleTimeout - now.Sub(p.idle[0].idleSince))
}

// CloseIdleConnections closes the idle connections.
func (p *upstreamPool) CloseIdleConnections() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pc := range p.idle {
		pc.close()
	}
	clear(p.idle)
	p.idle = p.idle[:0]
	if p.sweep != nil {
		p.sweep.Stop()
		p.sweep = nil
	}
}

func (pc *upstreamConn) close() { _ = pc.conn.Close() }

// watch arranges for the exchange to be aborted when ctx, its request's, ends.
func (pc *upstreamConn) watch(ctx context.Context) {
	pc.stopAfter = context.AfterFunc(ctx, pc.abortFunc)
}

// unwatch ends the watch: false when the exchange was aborted, or is being.
func (pc *upstreamConn) unwatch() bool {
	stop := pc.stopAfter
	pc.stopAfter = nil
	return stop()
}

// abort makes a blocked read or write of the exchange return at once.
func (pc *upstreamConn) abort() {
	pc.aborted.Store(true)
	_ = pc.conn.SetDeadline(aLongTimeAgo)
}

// setReadDeadline sets the exchange's read deadline unless abort came first: an
// abort between the two stores would otherwise be undone.
func (pc *upstreamConn) setReadDeadline(t time.Time) {
	_ = pc.conn.SetReadDeadline(t)
	if pc.aborted.Load() {
		_ = pc.conn.SetDeadline(aLongTimeAgo)
	}
}

// aLongTimeAgo is a deadline in the past: a blocked read or write given it returns at once.
var aLongTimeAgo = time.Unix(1, 0)

// errHeaderTimeout is the upstream not answering within ResponseHeaderTimeout.
var errHeaderTimeout = errors.New("timeout awaiting response headers")

// exchange sends a request and reads its response. unanswered is true
// when the error came before any byte of the response.
func (pc *upstreamConn) exchange(r *http.Request, w http.ResponseWriter) (resp *http.Response, err error, unanswered bool) {
	ctx := r.Context()
	// The client going away (or serve shutting down) aborts the exchange.
	pc.watch(ctx)
	fail := func(err error, unanswered bool) (*http.Response, error, bool) {
		pc.unwatch()
		if cerr := ctx.Err(); cerr != nil {
			return nil, cerr, false
		}
		if isTimeout(err) {
			err = errHeaderTimeout
		}
		return nil, err, unanswered
	}
	if pc.pool.headerTimeout > 0 {
		pc.setReadDeadline(time.Now().Add(pc.pool.headerTimeout))
	}
	if err := pc.send(appendProxied(pc.wbuf[:0], r, pc.pool.host)); err != nil {
		return fail(err, true)
	}
	var body *upstreamBody
	for {
		if _, err := pc.br.Peek(1); err != nil {
			return fail(err, !isTimeout(err))
		}
		if sr, ok := readSimpleResponse(pc.br, r); ok {
			resp, body = &sr.resp, &sr.body
			break
		}
		resp, err = http.ReadResponse(pc.br, r)
		if err != nil {
			return fail(err, false)
		}
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			break
		}
		// An informational answer (103 Early Hints) goes to the client at once,
		// without the final answer's headers; the limiter's stay for both.
		h := w.Header()
		var copied []string
		for k, vv := range resp.Header {
			if !hopByHop(k) && !setByLimiter(h, k) {
				h[k] = vv
				copied = append(copied, k)
			}
		}
		w.WriteHeader(resp.StatusCode)
		for _, k := range copied {
			delete(h, k)
		}
	}
	if pc.pool.headerTimeout > 0 && !bodyBuffered(resp, pc.br) {
		// The body may take longer than the headers' bound. One already
		// read needs no clearing: the next exchange sets its own deadline,
		// and the idle probe disregards deadlines.
		pc.setReadDeadline(time.Time{})
	}
	// A 101 is never reused (upgrades do not take this path).
	reusable := !resp.Close && resp.StatusCode != http.StatusSwitchingProtocols
	if resp.Body == http.NoBody {
		pc.release(reusable)
		return resp, nil, false
	}
	if body == nil {
		body = &upstreamBody{body: resp.Body}
		resp.Body = body
	}
	body.pc, body.reusable = pc, reusable
	return resp, nil, false
}

// maxKeptRequestBuffer is the largest send buffer a connection keeps between
// requests: a rare huge head does not pin its memory.
const maxKeptRequestBuffer = 64 << 10

// send writes the request req, waiting for the answer to begin where the
// platform allows (idleProbe.sendThenAwait), and keeps req's buffer for the next.
func (pc *upstreamConn) send(req []byte) error {
	sent, err := pc.probe.sendThenAwait(req)
	if err == nil && sent < len(req) {
		_, err = pc.conn.Write(req[sent:])
	}
	if cap(req) <= maxKeptRequestBuffer {
		pc.wbuf = req[:0]
	} else {
		pc.wbuf = nil
	}
	return err
}

// bodyBuffered says whether all of resp's body is in br already.
func bodyBuffered(resp *http.Response, br *bufio.Reader) bool {
	return resp.Body == http.NoBody || (resp.ContentLength >= 0 && int64(br.Buffered()) >= resp.ContentLength)
}

// release ends an exchange, pooling the connection when it may carry another request.
func (pc *upstreamConn) release(reusable bool) {
	if pc.unwatch() && reusable && pc.br.Buffered() == 0 {
		pc.pool.put(pc)
		return
	}
	pc.close()
}

// upstreamBody is a response body of an upstreamConn: read to its end it gives the
// connection back; closed early it closes the connection. Used by one goroutine.
type upstreamBody struct {
	pc        *upstreamConn
	body      io.ReadCloser // http.ReadResponse's; nil: remaining bytes of pc.br
	remaining int64
	reusable  bool
	done      bool
}

// Read implements io.Reader.
func (b *upstreamBody) Read(p []byte) (int, error) {
	if b.done {
		return 0, io.EOF
	}
	var n int
	var err error
	if b.body != nil {
		n, err = b.body.Read(p)
	} else {
		n, err = b.readLength(p)
	}
	if err == io.EOF {
		b.done = true
		b.pc.release(b.reusable)
	}
	return n, err
}

// readLength reads a body of known length as net/http's body does: io.EOF with
// its last bytes, io.ErrUnexpectedEOF when the upstream closes before them.
func (b *upstreamBody) readLength(p []byte) (int, error) {
	if int64(len(p)) > b.remaining {
		p = p[:b.remaining]
	}
	n, err := b.pc.br.Read(p)
	b.remaining -= int64(n)
	if b.remaining == 0 {
		return n, io.EOF
	}
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

// Close implements io.Closer.
func (b *upstreamBody) Close() error {
	if !b.done {
		b.done = true
		b.pc.unwatch()
		b.pc.close()
	}
	return nil
}

// isTimeout reports whether err is a read deadline expiring.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}
