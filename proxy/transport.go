package proxy

import (
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/rl-exporter/rl-exporter/config"
)

// Defaults of TransportConfig: those of the config file (config.Defaults).
const (
	DefaultMaxIdleConnsPerHost   = config.DefaultMaxIdleConnsPerHost
	DefaultIdleConnTimeout       = config.DefaultIdleConnTimeout
	DefaultDialTimeout           = config.DefaultDialTimeout
	DefaultResponseHeaderTimeout = config.DefaultResponseHeaderTimeout
)

// proxyBufferSize is the size of the proxy's copy buffers (httputil.ReverseProxy's default).
const proxyBufferSize = 32 << 10

// TransportConfig configures the connections from the reverse proxy to the
// upstream; a zero field takes its Default constant.
type TransportConfig struct {
	// MaxIdleConnsPerHost is how many idle upstream connections are kept for reuse;
	// size it to the number of requests in flight at once.
	MaxIdleConnsPerHost int
	// IdleConnTimeout closes a connection idle for this long.
	IdleConnTimeout time.Duration
	// DialTimeout bounds opening a connection.
	DialTimeout time.Duration
	// ResponseHeaderTimeout bounds the wait for the response headers after the
	// request is written, past which the client gets 502; negative: no bound.
	ResponseHeaderTimeout time.Duration
	// H2C speaks HTTP/2 with prior knowledge to an http:// upstream that accepts it,
	// so that requests share a few multiplexed connections (https:// negotiates
	// HTTP/2 through TLS on its own).
	H2C bool
}

func (c TransportConfig) withDefaults() TransportConfig {
	if c.MaxIdleConnsPerHost <= 0 {
		c.MaxIdleConnsPerHost = DefaultMaxIdleConnsPerHost
	}
	if c.IdleConnTimeout <= 0 {
		c.IdleConnTimeout = DefaultIdleConnTimeout
	}
	if c.DialTimeout <= 0 {
		c.DialTimeout = DefaultDialTimeout
	}
	switch {
	case c.ResponseHeaderTimeout == 0:
		c.ResponseHeaderTimeout = DefaultResponseHeaderTimeout
	case c.ResponseHeaderTimeout < 0:
		c.ResponseHeaderTimeout = 0 // http.Transport: no bound
	}
	return c
}

// NewTransport returns the http.Transport the reverse proxy reaches the upstream
// with: keep-alive connections, HTTP/2 with H2C or when TLS negotiates it, no
// transparent compression (bodies pass as the upstream sent them) and no proxy
// from the environment. The Transport is safe for concurrent use.
func NewTransport(cfg TransportConfig) *http.Transport {
	cfg = cfg.withDefaults()
	dialer := &net.Dialer{Timeout: cfg.DialTimeout, KeepAlive: 30 * time.Second}
	t := &http.Transport{
		DialContext:           dialer.DialContext,
		MaxIdleConns:          cfg.MaxIdleConnsPerHost,
		MaxIdleConnsPerHost:   cfg.MaxIdleConnsPerHost,
		IdleConnTimeout:       cfg.IdleConnTimeout,
		ResponseHeaderTimeout: cfg.ResponseHeaderTimeout,
		TLSHandshakeTimeout:   cfg.DialTimeout,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true,
		ForceAttemptHTTP2:     true,
	}
	if cfg.H2C {
		// Without HTTP1 in the set, http:// requests use HTTP/2 with prior knowledge.
		p := new(http.Protocols)
		p.SetUnencryptedHTTP2(true)
		p.SetHTTP2(true)
		t.Protocols = p
	}
	return t
}

// bufferPool lends the reverse proxy its copy buffers (httputil.BufferPool). Safe
// for concurrent use; once warm it allocates nothing, since a returned buffer goes
// in a *[]byte holder from a pool of empty ones (a bare slice would allocate per Put).
type bufferPool struct {
	full  sync.Pool // *[]byte holding a buffer
	empty sync.Pool // *[]byte holding nothing
}

// Get returns a buffer of proxyBufferSize bytes.
func (p *bufferPool) Get() []byte {
	h, _ := p.full.Get().(*[]byte)
	if h == nil {
		return make([]byte, proxyBufferSize)
	}
	b := *h
	*h = nil
	p.empty.Put(h)
	return b
}

// Put gives back a buffer obtained from Get.
func (p *bufferPool) Put(b []byte) {
	if cap(b) < proxyBufferSize {
		return
	}
	h, _ := p.empty.Get().(*[]byte)
	if h == nil {
		h = new([]byte)
	}
	*h = b[:proxyBufferSize]
	p.full.Put(h)
}
