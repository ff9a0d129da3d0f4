package proxy

import (
	"net/http"

	"github.com/rl-exporter/rl-exporter/decision"
)

// How both proxy paths merge an upstream's answer with the rate-limit headers: a
// header the limiter set (decision.HeaderNames) replaces the upstream's of that
// name, since it describes the limit that refuses the client's next requests and two
// values in a one-value field are read as either; every other header passes as it came.

// limiterHeaders are the names of decision.HeaderNames.
var limiterHeaders = func() map[string]bool {
	m := make(map[string]bool, len(decision.HeaderNames))
	for _, k := range decision.HeaderNames {
		m[k] = true
	}
	return m
}()

// setByLimiter says whether k, a canonical header name, is a rate-limit
// header already on the client's response h, whose value is to stand.
func setByLimiter(h http.Header, k string) bool {
	_, set := h[k]
	return set && limiterHeaders[k]
}

// limiterFirst applies the merge above on the ReverseProxy path, which appends the
// upstream's headers to the response's: the limiter's are put back, alone, before
// each status is written.
type limiterFirst struct{ next http.Handler }

// ServeHTTP implements http.Handler.
func (l limiterFirst) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	var lw *limiterWriter
	for _, k := range decision.HeaderNames {
		if vv, ok := h[k]; ok {
			if lw == nil {
				lw = &limiterWriter{ResponseWriter: w}
			}
			lw.keys = append(lw.keys, k)
			lw.vals = append(lw.vals, vv)
		}
	}
	if lw == nil {
		l.next.ServeHTTP(w, r)
		return
	}
	l.next.ServeHTTP(lw, r)
}

// limiterWriter is a ResponseWriter that restores the limiter's headers, keys and
// vals, before each status it writes. Used by the handler's goroutine alone.
type limiterWriter struct {
	http.ResponseWriter
	keys  []string
	vals  [][]string
	wrote bool
}

// WriteHeader implements http.ResponseWriter.
func (lw *limiterWriter) WriteHeader(code int) {
	h := lw.ResponseWriter.Header()
	for i, k := range lw.keys {
		h[k] = lw.vals[i]
	}
	if code >= 200 {
		lw.wrote = true
	}
	lw.ResponseWriter.WriteHeader(code)
}

// Write implements http.ResponseWriter.
func (lw *limiterWriter) Write(p []byte) (int, error) {
	if !lw.wrote {
		lw.WriteHeader(http.StatusOK)
	}
	return lw.ResponseWriter.Write(p)
}

// Unwrap gives http.ResponseController the writer underneath (flush, deadlines, hijack).
func (lw *limiterWriter) Unwrap() http.ResponseWriter { return lw.ResponseWriter }
