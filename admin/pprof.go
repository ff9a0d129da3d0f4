package admin

import (
	"net/http"
	"net/http/pprof"
)

// ProfilingHandlers returns net/http/pprof's handlers by ServeMux pattern
// under /debug/pprof/, for the admin listener, to be put behind a TokenGuard.
// They are registered here explicitly; the DefaultServeMux that importing
// net/http/pprof fills is never served. The command line
// (/debug/pprof/cmdline) is left out: it may carry a Redis URL with its
// password.
func ProfilingHandlers() map[string]http.Handler {
	return map[string]http.Handler{
		"/debug/pprof/":        http.HandlerFunc(pprof.Index),
		"/debug/pprof/profile": http.HandlerFunc(pprof.Profile),
		"/debug/pprof/symbol":  http.HandlerFunc(pprof.Symbol),
		"/debug/pprof/trace":   http.HandlerFunc(pprof.Trace),
	}
}
