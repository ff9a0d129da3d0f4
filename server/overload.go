package server

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rl-exporter/rl-exporter/collector"
	"github.com/rl-exporter/rl-exporter/httplimit"
	"github.com/rl-exporter/rl-exporter/overload"
)

// Overload sheds the requests to the upstream by priority once its adaptive
// concurrency limit is reached (package overload).
type Overload struct {
	// Controller is the upstream's limit; required.
	Controller *overload.Controller
	// Priority ranks a request decided as class on tier; nil: default. Called concurrently.
	Priority func(class, tier string) overload.Priority
	// RetryAfter is the Retry-After of a shed request's 503. Default 1s.
	RetryAfter time.Duration
}

func (s *Server) overloadGate(next http.Handler) http.Handler {
	o := s.cfg.Overload
	retryAfter := strconv.Itoa(max(int(o.RetryAfter.Round(time.Second)/time.Second), 1))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := overload.Default
		if rt, ok := httplimit.RouteFrom(r.Context()); ok && o.Priority != nil {
			p = o.Priority(rt.Class, rt.Tier)
		}
		ticket, reason, ok := o.Controller.AcquireWait(r.Context(), p)
		if !ok {
			if s.overloadMetrics != nil {
				s.overloadMetrics.Shed(p.String(), string(reason))
			}
			w.Header().Set("Retry-After", retryAfter)
			w.Header().Set("Cache-Control", "no-store")
			writeError(w, http.StatusServiceUnavailable, "overloaded",
				"the upstream is at its concurrency limit for "+p.String()+" requests; retry after "+retryAfter+"s")
			return
		}
		sw := &statusWriter{ResponseWriter: w}
		// Deferred, so that a response cut short (the proxy aborts the handler) is done too.
		defer func() { ticket.Done(sw.status >= 500 || sw.status == 0) }()
		next.ServeHTTP(sw, r)
	})
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (sw *statusWriter) WriteHeader(code int) {
	if sw.status == 0 && code >= 200 {
		sw.status = code
	}
	sw.ResponseWriter.WriteHeader(code)
}

func (sw *statusWriter) Write(b []byte) (int, error) {
	if sw.status == 0 {
		sw.status = http.StatusOK
	}
	return sw.ResponseWriter.Write(b)
}

// Unwrap gives http.ResponseController the writer underneath (flush, deadlines, hijack).
func (sw *statusWriter) Unwrap() http.ResponseWriter { return sw.ResponseWriter }

// OverloadController returns the upstream's concurrency limit; nil without Config.Overload.
func (s *Server) OverloadController() *overload.Controller {
	if s.cfg.Overload == nil || s.cfg.Upstream == nil {
		return nil
	}
	return s.cfg.Overload.Controller
}

// OverloadMetrics returns rate_limit_overload_limit, rate_limit_overload_in_flight and
// rate_limit_shed_total (nothing without Config.Overload). Safe for concurrent use.
func (s *Server) OverloadMetrics() prometheus.Collector {
	if s.overloadMetrics == nil {
		return noMetrics{}
	}
	return s.overloadMetrics
}

type noMetrics struct{}

func (noMetrics) Describe(chan<- *prometheus.Desc) {}
func (noMetrics) Collect(chan<- prometheus.Metric) {}

func (s *Server) setupOverload() error {
	o := s.cfg.Overload
	if o == nil || s.cfg.Upstream == nil {
		return nil
	}
	if o.Controller == nil {
		return errors.New("server: Overload.Controller is required")
	}
	m, err := newOverloadMetrics(o, s.cfg.Upstream.Host)
	if err != nil {
		return fmt.Errorf("server: Overload: %w", err)
	}
	s.overloadMetrics = m
	return nil
}

func newOverloadMetrics(o *Overload, host string) (*collector.Overload, error) {
	var priorities, reasons []string
	for _, p := range overload.Priorities {
		priorities = append(priorities, p.String())
	}
	for _, r := range overload.Reasons {
		reasons = append(reasons, string(r))
	}
	return collector.NewOverload(collector.OverloadConfig{Upstream: host, Priorities: priorities, Reasons: reasons,
		State: func() (int, int) { st := o.Controller.Stats(); return st.Limit, st.InFlight }})
}
