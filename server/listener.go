package server

import (
	"errors"
	"log/slog"
	"net/http"
	"runtime/debug"
	"sync/atomic"

	"github.com/rl-exporter/rl-exporter/httplimit"
)

// listenerHandler does every listener's checks (headLimits, deadlineBody, recovered) in one frame.
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

// recovered answers 500 (forward-auth: DenyInternal) unless the answer had started, logs and
// counts the panic p; http.ErrAbortHandler, a deliberate abort, goes on to net/http.
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
