package server

import (
	"net/http"

	"github.com/rl-exporter/rl-exporter/proxy"
)

// TransportConfig configures the connections from the proxy to the upstream.
//
// Deprecated: use proxy.TransportConfig.
type TransportConfig = proxy.TransportConfig

// NewTransport returns the http.Transport the proxy reaches the upstream with.
//
// Deprecated: use proxy.NewTransport.
func NewTransport(cfg TransportConfig) *http.Transport { return proxy.NewTransport(cfg) }

// Defaults of TransportConfig.
//
// Deprecated: use proxy's constants of the same names.
const (
	DefaultMaxIdleConnsPerHost   = proxy.DefaultMaxIdleConnsPerHost
	DefaultIdleConnTimeout       = proxy.DefaultIdleConnTimeout
	DefaultDialTimeout           = proxy.DefaultDialTimeout
	DefaultResponseHeaderTimeout = proxy.DefaultResponseHeaderTimeout
)
