package server

import (
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Why the body is bounded by a deadline set in the handler rather than by
// http.Server.ReadTimeout: net/http keeps the ReadTimeout deadline on the
// connection while the handler runs, and the read it makes in the
// background to notice a client going away then fails at that deadline and
// cancels the request's context. A proxied request whose upstream takes
// longer than ReadTimeout would be cancelled, and so would a request held
// for its leaky_bucket delay. So http.Server gets only ReadHeaderTimeout
// (whose deadline net/http clears once the headers are read), and the
// handler sets ReadTimeout from its first read of the body and clears it
// again once the body is read.

// readDeadliner is the part of net/http's ResponseWriter that moves the
// connection's read deadline (what http.ResponseController calls).
type readDeadliner interface {
	SetReadDeadline(time.Time) error
}

// bodyDeadlines wraps a listener's handler so that a request's body must
// arrive within ReadTimeout of the first read of it, and nothing else is
// bounded by that deadline (see above).
func (s *Server) bodyDeadlines(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rd, ok := w.(readDeadliner)
		if !ok { // not net/http's HTTP/1 writer: leave it to the server
			next.ServeHTTP(w, r)
			return
		}
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		b := &requestBody{ReadCloser: r.Body, conn: rd, timeout: s.cfg.ReadTimeout}
		r.Body = b
		next.ServeHTTP(w, r)
		b.handlerDone()
	})
}

// requestBody is a request body read under a deadline, remembering why it
// failed. Its methods are safe for concurrent use (the proxy's transport
// reads it on a goroutine of its own, possibly after the handler returned).
type requestBody struct {
	io.ReadCloser
	conn    readDeadliner
	timeout time.Duration

	mu      sync.Mutex
	started bool // the deadline is set
	ended   bool // EOF or an error was seen
	done    bool // the handler returned: the connection is not ours to change
}

func (b *requestBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	if !b.started && !b.done {
		b.started = true
		_ = b.conn.SetReadDeadline(time.Now().Add(b.timeout))
	}
	b.mu.Unlock()
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.mu.Lock()
		if !b.ended {
			b.ended = true
			if errors.Is(err, io.EOF) {
				// Read in full: the connection's background read, waiting
				// for the next request, must not time out.
				if !b.done {
					_ = b.conn.SetReadDeadline(time.Time{})
				}
			}
		}
		b.mu.Unlock()
		if !errors.Is(err, io.EOF) {
			err = &BodyError{Err: err}
		}
	}
	return n, err
}

// BodyError is a failure to read a request's body from the client: a
// malformed body (a bad chunk size) or a client too slow for ReadTimeout.
// Whoever reads the body (the proxy's transport, the decision API) gets it
// wrapped in this type, so that the failure is known as the client's.
type BodyError struct{ Err error }

// Error is the underlying error's message.
func (e *BodyError) Error() string { return e.Err.Error() }

// Unwrap returns the underlying error.
func (e *BodyError) Unwrap() error { return e.Err }

// handlerDone bounds what net/http still reads of a body the handler did
// not read (it discards up to 256 KiB to keep the connection), and stops
// further deadline changes.
func (b *requestBody) handlerDone() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.started {
		b.started = true
		_ = b.conn.SetReadDeadline(time.Now().Add(b.timeout))
	}
	b.done = true
}

// isTimeout reports whether err is a read deadline expiring.
func isTimeout(err error) bool {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// slowClientListener hands out connections that count themselves as a slow
// client when a read deadline cuts them off while a request is arriving.
type slowClientListener struct {
	net.Listener
	slow      *atomic.Uint64
	oversized *atomic.Uint64 // net/http's 431s for a head over MaxHeaderBytes
}

func (l *slowClientListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &slowClientConn{Conn: c, slow: l.slow, oversized: l.oversized}, nil
}

// slowClientConn is one connection. A read deadline expiring while some
// bytes of a request have arrived (the headers under ReadHeaderTimeout, the
// body under ReadTimeout) counts it once; one expiring on a connection
// that sent nothing since its last request (IdleTimeout, a connection
// opened ahead of need) does not.
//
// net/http also aborts its own background read by setting a read deadline
// in the distant past; such a deadline is not a client's slowness, so the
// connection remembers whether the deadline in force is one.
type slowClientConn struct {
	net.Conn
	slow      *atomic.Uint64
	oversized *atomic.Uint64
	arriving  atomic.Bool // bytes of a request came since the connection was idle
	aborting  atomic.Bool // the read deadline in force is in the past when set
	counted   atomic.Bool
}

func (c *slowClientConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && !c.arriving.Load() {
		c.arriving.Store(true)
	}
	if err != nil && c.arriving.Load() && !c.aborting.Load() && isTimeout(err) && c.counted.CompareAndSwap(false, true) {
		c.slow.Add(1)
	}
	return n, err
}

// Write is net.Conn's, counting net/http's own 431 (which no handler sees).
func (c *slowClientConn) Write(p []byte) (int, error) {
	countOversized(p, c.oversized)
	return c.Conn.Write(p)
}

// SetReadDeadline is net.Conn's, noting a deadline set in the past.
func (c *slowClientConn) SetReadDeadline(t time.Time) error {
	c.aborting.Store(!t.IsZero() && t.Before(time.Now()))
	return c.Conn.SetReadDeadline(t)
}

// SetDeadline is net.Conn's, noting a deadline set in the past.
func (c *slowClientConn) SetDeadline(t time.Time) error {
	c.aborting.Store(!t.IsZero() && t.Before(time.Now()))
	return c.Conn.SetDeadline(t)
}

// slowClientConnState is the http.Server ConnState hook: a connection back
// to idle has no request arriving.
func slowClientConnState(c net.Conn, st http.ConnState) {
	if sc, ok := c.(*slowClientConn); ok && st == http.StateIdle {
		sc.arriving.Store(false)
	}
}

// SlowClients returns how many connections of the named listener ("main",
// "metrics", "admin") were cut off as slow clients.
func (s *Server) SlowClients(listener string) uint64 {
	if c, ok := s.slow[listener]; ok {
		return c.Load()
	}
	return 0
}

var slowClientsDesc = prometheus.NewDesc("rate_limit_slow_clients_total",
	"Connections cut off because a request's headers or body did not arrive within server.read_header_timeout or server.read_timeout, by listener.",
	[]string{"listener"}, nil)

var adminAuthFailuresDesc = prometheus.NewDesc("rl_exporter_admin_auth_failures_total",
	"Requests to the admin listener refused for a missing or wrong bearer token.", nil, nil)

// Metrics returns the server's own counters as a prometheus.Collector to
// register on the registry /metrics serves: rate_limit_slow_clients_total
// and rate_limit_oversized_headers_total by listener and, with
// AdminAuthFailures, rl_exporter_admin_auth_failures_total. It is safe for
// concurrent use.
func (s *Server) Metrics() prometheus.Collector { return serverMetrics{s} }

type serverMetrics struct{ s *Server }

// Describe is part of prometheus.Collector.
func (m serverMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- slowClientsDesc
	ch <- oversizedHeadersDesc
	ch <- adminAuthFailuresDesc
}

// Collect is part of prometheus.Collector.
func (m serverMetrics) Collect(ch chan<- prometheus.Metric) {
	for name, c := range m.s.slow {
		ch <- prometheus.MustNewConstMetric(slowClientsDesc, prometheus.CounterValue, float64(c.Load()), name)
	}
	for name, c := range m.s.oversized {
		ch <- prometheus.MustNewConstMetric(oversizedHeadersDesc, prometheus.CounterValue, float64(c.Load()), name)
	}
	if f := m.s.cfg.AdminAuthFailures; f != nil {
		ch <- prometheus.MustNewConstMetric(adminAuthFailuresDesc, prometheus.CounterValue, float64(f.Total()))
	}
}

// OversizedHeaders returns how many requests of the named listener
// ("main", "metrics", "admin") got 431 for a head over MaxHeaderBytes or
// more header fields than MaxHeaderCount. On a metrics listener behind a
// web config (TLS), only the second are counted.
func (s *Server) OversizedHeaders(listener string) uint64 {
	if c, ok := s.oversized[listener]; ok {
		return c.Load()
	}
	return 0
}

var oversizedHeadersDesc = prometheus.NewDesc("rate_limit_oversized_headers_total",
	"Requests answered 431 because their head was over server.max_header_bytes or had more header fields than server.max_header_count, by listener.",
	[]string{"listener"}, nil)
