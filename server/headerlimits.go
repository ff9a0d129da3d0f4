package server

import (
	"bytes"
	"fmt"
	"net/http"
	"sync/atomic"

	"github.com/rl-exporter/rl-exporter/config"
	"github.com/rl-exporter/rl-exporter/httplimit"
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
	srv.Handler = headLimits{maxCount: maxCount}.wrap(h)
}

// DefaultAuthMaxHeaderBytes is Config.AuthMaxHeaderBytes's default: net/http's own
// bound, so that Caddy and Traefik, which accept heads that large and forward every
// header by default, forward none that serve would not read.
const DefaultAuthMaxHeaderBytes = config.DefaultAuthMaxHeaderBytes

// authHeadSlack is what the listener serving forward-auth reads past AuthMaxHeaderBytes, so
// that a head a little over the bound (a gateway's own fields added to the most it accepts)
// is still answered with the gateway's refusal status, not net/http's 431.
const authHeadSlack = 64 << 10

// headLimits is what a listener checks of a head before any other work.
type headLimits struct {
	// maxCount bounds the field lines; maxBytes, when set, the head's size: net/http reads
	// heads past it on a listener that serves forward-auth (the bound of the rest is then
	// checked here).
	maxCount, maxBytes int
	refused            *atomic.Uint64 // counts the 431s when set
	// auth, when set, says that a request is a forward-auth one: it goes on unchecked, for
	// the forward-auth handler refuses a head past its bounds with the gateway's status.
	auth func(*http.Request) bool
}

// wrap answers 431 to a request past the bounds, counting it in refused when set; the others
// go to next.
func (l headLimits) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !l.refuse(w, r) {
			next.ServeHTTP(w, r)
		}
	})
}

// refuse answers 431 to a request past the bounds, counting it in refused when set, and
// says whether it did.
func (l headLimits) refuse(w http.ResponseWriter, r *http.Request) bool {
	if l.auth != nil && l.auth(r) {
		return false
	}
	msg := ""
	if n := headerCount(r); n > l.maxCount {
		msg = fmt.Sprintf("the request has %d header fields; at most %d are accepted", n, l.maxCount)
	} else if l.maxBytes > 0 {
		if n := headBytes(r); n > l.maxBytes {
			msg = fmt.Sprintf("the request's head is %d bytes; at most %d are accepted", n, l.maxBytes)
		}
	}
	if msg == "" {
		return false
	}
	if l.refused != nil {
		l.refused.Add(1)
	}
	// The rest of what such a client sends is not worth reading.
	w.Header().Set("Connection", "close")
	writeError(w, http.StatusRequestHeaderFieldsTooLarge, "header_fields_too_large", msg)
	return true
}

// authHeadLimit is the forward-auth handler next behind the bounds of a head: past
// maxCount field lines or maxBytes bytes, mw refuses it (DenyRequestTooLarge) with the
// status the gateway passes on as a refusal.
func authHeadLimit(next http.Handler, mw *httplimit.Middleware, maxBytes, maxCount int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n := headerCount(r); n > maxCount {
			mw.DenyAuth(w, r, httplimit.DenyRequestTooLarge, fmt.Sprintf("the request has %d header fields; at most %d are read (server.max_header_count)", n, maxCount))
			return
		}
		if n := headBytes(r); n > maxBytes {
			mw.DenyAuth(w, r, httplimit.DenyRequestTooLarge, fmt.Sprintf("the request's head is %d bytes; at most %d are read (server.auth_max_header_bytes)", n, maxBytes))
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

// headBytes is the size of r's head as its parsed fields spell it: the request line,
// "Name: value" and CRLF for each field line (Host included) and the blank line. It can
// be a few bytes under what arrived (spaces net/http trimmed), never over.
func headBytes(r *http.Request) int {
	n := len(r.Method) + 1 + len(r.RequestURI) + 1 + len(r.Proto) + 2 + 2
	if r.Host != "" {
		n += len("Host: ") + len(r.Host) + 2
	}
	for k, vv := range r.Header {
		for _, v := range vv {
			n += len(k) + 2 + len(v) + 2
		}
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
