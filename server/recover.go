package server

import (
	"io"
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rl-exporter/rl-exporter/httplimit"
)

// A handler's panic left to net/http closes the connection without an answer: the client
// reads an empty reply, and a gateway asking /v1/auth takes it as the limiter's failure.
// listenerHandler (listener.go) answers instead, once, and counts it.

// startedWriter notes whether its answer has started. Pooled: the request path allocates nothing.
type startedWriter struct {
	http.ResponseWriter
	started bool
}

var startedWriters = sync.Pool{New: func() any { return new(startedWriter) }}

// WriteHeader implements http.ResponseWriter.
func (w *startedWriter) WriteHeader(code int) {
	if code >= 200 { // 1xx answers are informational: the answer proper is still to come
		w.started = true
	}
	w.ResponseWriter.WriteHeader(code)
}

// Write implements http.ResponseWriter.
func (w *startedWriter) Write(p []byte) (int, error) {
	w.started = true
	return w.ResponseWriter.Write(p)
}

// ReadFrom keeps net/http's sendfile.
func (w *startedWriter) ReadFrom(r io.Reader) (int64, error) {
	w.started = true
	if rf, ok := w.ResponseWriter.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{w.ResponseWriter}, r)
}

// Flush implements http.Flusher.
func (w *startedWriter) Flush() {
	w.started = true
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *startedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Panics returns how many panics the named listener ("main", "metrics", "admin", "grpc") recovered.
func (s *Server) Panics(listener string) uint64 {
	if c, ok := s.panics[listener]; ok {
		return c.Load()
	}
	return 0
}

var panicsDesc = prometheus.NewDesc("rl_exporter_panics_total",
	"Panics recovered while serving a request, by listener: each answered 500 (a forward-auth request: its refusal, reason internal) and logged with its stack.",
	[]string{"listener"}, nil)

var authDeniedDesc = prometheus.NewDesc("rate_limit_auth_denied_total",
	"Forward-auth requests (/v1/auth) refused without a decision, with the gateway's refusal status, by reason: request_too_large, bad_path, bad_request or internal.",
	[]string{"reason"}, nil)

func (m serverMetrics) collectAuthDenied(ch chan<- prometheus.Metric) {
	mw := m.s.cfg.Middleware
	for _, r := range httplimit.DenyReasons() {
		ch <- prometheus.MustNewConstMetric(authDeniedDesc, prometheus.CounterValue, float64(mw.AuthDenied(r)), r.String())
	}
}
