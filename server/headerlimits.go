package server

import (
	"bytes"
	"fmt"
	"net/http"
	"sync/atomic"

	"github.com/rl-exporter/rl-exporter/config"
	"github.com/rl-exporter/rl-exporter/httplimit"
)

// net/http reads 4096 bytes past http.Server.MaxHeaderBytes, and bounds no field
// count (90,000 small ones fit in 1 MB), so headLimits counts them first.

// Defaults of Config's header bounds: those of the config file.
const (
	DefaultMaxHeaderBytes = config.DefaultMaxHeaderBytes
	DefaultMaxHeaderCount = config.DefaultMaxHeaderCount
	// MinMaxHeaderBytes keeps net/http's own bound (MaxHeaderBytes less its slack) positive.
	MinMaxHeaderBytes = 2 * headerReadSlack
)

// headerReadSlack is what net/http reads of a head beyond MaxHeaderBytes before its 431.
const headerReadSlack = 4096

// LimitHeaders answers 431 to heads over maxBytes (at least MinMaxHeaderBytes) or
// maxCount field lines, Host included. Call it before srv serves: it sets
// srv.MaxHeaderBytes and wraps srv.Handler.
func LimitHeaders(srv *http.Server, maxBytes, maxCount int) {
	srv.MaxHeaderBytes = max(maxBytes, MinMaxHeaderBytes) - headerReadSlack
	h := srv.Handler
	if h == nil {
		h = http.DefaultServeMux
	}
	srv.Handler = headLimits{maxCount: maxCount}.wrap(h)
}

// DefaultAuthMaxHeaderBytes is net/http's own bound, so that Caddy and Traefik, which
// forward every header by default, forward no head that serve would not read.
const DefaultAuthMaxHeaderBytes = config.DefaultAuthMaxHeaderBytes

// authHeadSlack covers a gateway's own fields added to the largest head it accepts, so that
// head still gets the gateway's refusal status, not net/http's 431.
const authHeadSlack = 64 << 10

type headLimits struct {
	// maxBytes is set where net/http reads larger heads for forward-auth.
	maxCount, maxBytes int
	refused            *atomic.Uint64 // counts the 431s when set
	// auth matches forward-auth requests, left to authHeadLimit's gateway status.
	auth func(*http.Request) bool
}

func (l headLimits) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !l.refuse(w, r) {
			next.ServeHTTP(w, r)
		}
	})
}

// refuse answers 431 to a request past the bounds and says whether it did.
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
	w.Header().Set("Connection", "close")
	writeError(w, http.StatusRequestHeaderFieldsTooLarge, "header_fields_too_large", msg)
	return true
}

// authHeadLimit refuses a head past the bounds with mw's DenyRequestTooLarge, whose
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

// headerCount relies on net/http keeping each field line as one value, and Host apart.
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

// headBytes is r's head size as its parsed fields spell it: a few bytes under what
// arrived (spaces net/http trimmed), never over.
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

// netHTTP431 starts net/http's own 431, one write that slowClientConn.Write can tell.
var netHTTP431 = []byte("HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: text/plain")

func countOversized(p []byte, refused *atomic.Uint64) {
	if refused != nil && bytes.HasPrefix(p, netHTTP431) {
		refused.Add(1)
	}
}
