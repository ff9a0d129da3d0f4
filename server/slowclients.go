package server

import (
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

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

// slowClientConn counts itself once as a slow client when a read deadline expires mid-request,
// not on a connection idle since its last one. A deadline set in the past is net/http
// aborting its own background read, not slowness.
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

// SetReadDeadline and SetDeadline are net.Conn's, noting a deadline set in the past.
func (c *slowClientConn) SetReadDeadline(t time.Time) error {
	c.aborting.Store(!t.IsZero() && t.Before(time.Now()))
	return c.Conn.SetReadDeadline(t)
}

func (c *slowClientConn) SetDeadline(t time.Time) error {
	c.aborting.Store(!t.IsZero() && t.Before(time.Now()))
	return c.Conn.SetDeadline(t)
}

// slowClientConnState is the ConnState hook: a connection back to idle has no request arriving.
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

// Metrics returns rate_limit_slow_clients_total, rate_limit_oversized_headers_total,
// rl_exporter_panics_total, rate_limit_auth_denied_total and (with AdminAuthFailures)
// rl_exporter_admin_auth_failures_total for the /metrics registry. Safe for concurrent use.
func (s *Server) Metrics() prometheus.Collector { return serverMetrics{s} }

type serverMetrics struct{ s *Server }

// Describe is part of prometheus.Collector.
func (m serverMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- slowClientsDesc
	ch <- oversizedHeadersDesc
	ch <- adminAuthFailuresDesc
	ch <- panicsDesc
	ch <- authDeniedDesc
}

// Collect is part of prometheus.Collector.
func (m serverMetrics) Collect(ch chan<- prometheus.Metric) {
	for name, c := range m.s.slow {
		ch <- prometheus.MustNewConstMetric(slowClientsDesc, prometheus.CounterValue, float64(c.Load()), name)
	}
	for name, c := range m.s.oversized {
		ch <- prometheus.MustNewConstMetric(oversizedHeadersDesc, prometheus.CounterValue, float64(c.Load()), name)
	}
	for name, c := range m.s.panics {
		ch <- prometheus.MustNewConstMetric(panicsDesc, prometheus.CounterValue, float64(c.Load()), name)
	}
	if !m.s.cfg.CheckAPI.Disabled {
		m.collectAuthDenied(ch)
	}
	if f := m.s.cfg.AdminAuthFailures; f != nil {
		ch <- prometheus.MustNewConstMetric(adminAuthFailuresDesc, prometheus.CounterValue, float64(f.Total()))
	}
}

// OversizedHeaders returns how many requests of the named listener got 431 for their head;
// behind a web config (TLS), only those over MaxHeaderCount.
func (s *Server) OversizedHeaders(listener string) uint64 {
	if c, ok := s.oversized[listener]; ok {
		return c.Load()
	}
	return 0
}

var oversizedHeadersDesc = prometheus.NewDesc("rate_limit_oversized_headers_total",
	"Requests answered 431 because their head was over server.max_header_bytes or had more header fields than server.max_header_count, by listener.",
	[]string{"listener"}, nil)
