package server

import (
	"errors"
	"log/slog"
	"net/http"
	"runtime/debug"
	"sync/atomic"

	"github.com/rl-exporter/rl-exporter/httplimit"
)

// listenerHandler is what net/http calls on every listener, in one frame: it answers
// 431 to a head past the bounds (headLimits), puts the body under ReadTimeout from its
// first read (deadlineBody) and recovers next's panics (recovered), then calls next.
type listenerHandler struct {
	s      *Server
	limits headLimits
	panics *atomic.Uint64
	auth   func(*http.Request) bool // says a request is forward-auth; nil where it is not served
	next   http.Handler
}

// ServeHTTP implements http.Handler.
func (l *listenerHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if l.limits.refuse(w, r) {
		return
	}
	done := deadlineBody(w, r, l.s.cfg.ReadTimeout)
	sw := startedWriters.Get().(*startedWriter)
	sw.ResponseWriter, sw.started = w, false
	defer func() {
		p := recover()
		if done != nil {
			done()
		}
		started := sw.started
		sw.ResponseWriter = nil
		startedWriters.Put(sw)
		if p != nil {
			l.recovered(w, r, p, started)
		}
	}()
	l.next.ServeHTTP(sw, r)
}

// recovered answers the request whose handler panicked with p: a 500 JSON answer (on
// forward-auth the refusal DenyInternal instead) unless its answer had started, the panic
// logged once with its stack and counted in panics. http.ErrAbortHandler, the way to abort
// a response on purpose, goes on to net/http.
func (l *listenerHandler) recovered(w http.ResponseWriter, r *http.Request, p any, started bool) {
	if err, ok := p.(error); ok && errors.Is(err, http.ErrAbortHandler) {
		panic(p)
	}
	l.panics.Add(1)
	l.s.logger.LogAttrs(r.Context(), slog.LevelError, "panic serving a request",
		slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Any("panic", p),
		slog.Bool("answer_started", started), slog.String("stack", string(debug.Stack())))
	switch {
	case started:
		// Part of an answer is out: cut it off rather than append to it.
		panic(http.ErrAbortHandler)
	case l.auth != nil && l.auth(r):
		l.s.cfg.Middleware.DenyAuth(w, r, httplimit.DenyInternal, "the request could not be decided: an internal error")
	default:
		writeError(w, http.StatusInternalServerError, "internal", "an internal error; it is logged")
	}
}
