// Package proxy forwards requests to one upstream as rl-exporter serves them:
// the client appended to X-Forwarded-For, the Host kept, the rate-limit headers
// already on the response standing over the upstream's (proxyheaders.go). A
// request without a body to a plain http:// upstream takes the direct path
// (direct.go), written from the handler's goroutine over a kept-alive
// connection; every other request goes through httputil.ReverseProxy, whose
// answers the direct path's match (the differential tests hold them to it).
package proxy

import (
	"errors"
	"net/http"
	"net/http/httputil"
	"net/url"
)

// Config configures a Proxy.
type Config struct {
	// Upstream is where requests are forwarded: scheme and host, and on the
	// ReverseProxy path a base path joined to each request's. Required.
	Upstream *url.URL
	// Transport configures the connections to Upstream.
	Transport TransportConfig
	// ErrorHandler answers a request the upstream did not, err naming why (the
	// request body's own error among them). Nil: 502 with no body.
	ErrorHandler func(w http.ResponseWriter, r *http.Request, err error)
}

// Proxy is an http.Handler forwarding to Config.Upstream. Safe for concurrent
// use; Close it once no request is in flight any more.
type Proxy struct {
	handler http.Handler
	idle    []interface{ CloseIdleConnections() }
}

// New returns the Proxy cfg describes.
func New(cfg Config) (*Proxy, error) {
	upstream := cfg.Upstream
	if upstream == nil || upstream.Host == "" {
		return nil, errors.New("proxy: Upstream needs a host")
	}
	onError := cfg.ErrorHandler
	if onError == nil {
		onError = func(w http.ResponseWriter, _ *http.Request, _ error) { w.WriteHeader(http.StatusBadGateway) }
	}
	transport := NewTransport(cfg.Transport)
	buffers := &bufferPool{}
	rp := &httputil.ReverseProxy{
		Transport:  transport,
		BufferPool: buffers,
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(upstream)
			pr.Out.Host = pr.In.Host
			// SetXForwarded replaces X-Forwarded-For; keep the chain so far.
			if prior, ok := pr.In.Header["X-Forwarded-For"]; ok {
				pr.Out.Header["X-Forwarded-For"] = append([]string(nil), prior...)
			}
			pr.SetXForwarded()
		},
		ErrorHandler: onError,
	}
	p := &Proxy{handler: limiterFirst{rp}, idle: []interface{ CloseIdleConnections() }{transport}}
	if directPathFor(upstream, cfg.Transport) {
		pool := newUpstreamPool(upstream.Host, cfg.Transport)
		p.idle = append(p.idle, pool)
		p.handler = &directProxy{pool: pool, fallback: p.handler, onError: onError, buffers: buffers}
	}
	return p, nil
}

// ServeHTTP forwards r to the upstream and its answer to w.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) { p.handler.ServeHTTP(w, r) }

// Close closes the idle upstream connections (and their goroutines); a request
// after it opens new ones. It never fails.
func (p *Proxy) Close() error {
	for _, c := range p.idle {
		c.CloseIdleConnections()
	}
	return nil
}
