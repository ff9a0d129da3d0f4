package server

import (
	"bytes"
	"fmt"
	"net/http"
	"sync/atomic"

	"github.com/rl-exporter/rl-exporter/config"
)

// How a request's head is bounded: net/http reads 4096 bytes past
// http.Server.MaxHeaderBytes, so it is given the bound less that slack; it does not
// bound the number of fields (90,000 small ones fit in 1 MB, each a string and a
// slice entry), so headerCountLimit answers 431 before any other work.

// Defaults of Config's header bounds: those of the config file.
const (
	DefaultMaxHeaderBytes = config.DefaultMaxHeaderBytes
	DefaultMaxHeaderCount = config.DefaultMaxHeaderCount
	// MinMaxHeaderBytes is the least MaxHeaderBytes may be: net/http's slack, so that
	// net/http's own bound is positive, and a 4 KiB head beyond it.
	MinMaxHeaderBytes = 2 * headerReadSlack
)

// headerReadSlack is what net/http reads of a head beyond MaxHeaderBytes before its 431.
const headerReadSlack = 4096

// LimitHeaders bounds the heads of srv's requests to maxBytes bytes (request line
// and fields, MinMaxHeaderBytes at least) and maxCount field lines, Host included;
// past either the client gets 431. It sets srv.MaxHeaderBytes and wraps srv.Handler,
// so call it before srv serves.
func LimitHeaders(srv *http.Server, maxBytes, maxCount int) {
	srv.MaxHeaderBytes = max(maxBytes, MinMaxHeaderBytes) - headerReadSlack
	h := srv.Handler
	if h == nil {
		h = http.DefaultServeMux
	}
	srv.Handler = headerCountLimit(h, maxCount, nil)
}

// headerCountLimit answers 431 to a request with more than limit header field lines,
// counting it in refused when set; the others go to next.
func headerCountLimit(next http.Handler, limit int, refused *atomic.Uint64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n := headerCount(r); n > limit {
			if refused != nil {
				refused.Add(1)
			}
			// The rest of what such a client sends is not worth reading.
			w.Header().Set("Connection", "close")
			writeError(w, http.StatusRequestHeaderFieldsTooLarge, "header_fields_too_large",
				fmt.Sprintf("the request has %d header fields; at most %d are accepted", n, limit))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// headerCount is the number of header field lines r came with: net/http
// keeps each line as one value, and Host apart.
func headerCount(r *http.Request) int {
	n := 0
	if r.Host != "" {
		n = 1
	}
	for _, vv := range r.Header {
		n += len(vv)
	}
	return n
}

// netHTTP431 is how net/http answers a head over MaxHeaderBytes: one write on the
// connection, unlike a handler's buffered JSON, so slowClientConn.Write can tell it.
var netHTTP431 = []byte("HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: text/plain")

// countOversized counts in refused the answer p when it is net/http's 431.
func countOversized(p []byte, refused *atomic.Uint64) {
	if refused != nil && bytes.HasPrefix(p, netHTTP431) {
		refused.Add(1)
	}
}
