package rls

import (
	"crypto/tls"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"
)

// ServiceName is the gRPC name of Envoy's rate limit service, as the health service reports it.
const ServiceName = "envoy.service.ratelimit.v3.RateLimitService"

// NewServer returns a gRPC server serving svc, the standard health service (SERVING for "" and
// ServiceName) and server reflection, over TLS when tc is not nil, and the health server, with
// which the caller reports NOT_SERVING while shutting down. Both are safe for concurrent use.
func NewServer(svc *Service, tc *tls.Config, opts ...grpc.ServerOption) (*grpc.Server, *health.Server) {
	if tc != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(tc)))
	}
	gs := grpc.NewServer(opts...)
	rlsv3.RegisterRateLimitServiceServer(gs, svc)
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus(ServiceName, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(gs, hs)
	reflection.Register(gs)
	return gs, hs
}

// Defaults of ServerConfig.
const (
	// DefaultMaxConcurrentStreams: an Envoy sends one stream per check, so 100 in flight on one
	// connection is far above a healthy proxy's need, and bounds the goroutines it can hold.
	DefaultMaxConcurrentStreams = 100
	// DefaultKeepaliveMinTime is below the keepalive interval Envoy is usually given (30s and
	// up), so its pings are never taken for a flood.
	DefaultKeepaliveMinTime = 10 * time.Second
	// DefaultMaxConnectionIdle: an Envoy in use never idles that long (any call resets it) and
	// reconnects transparently after; a connection opened and left holds its buffers no longer.
	DefaultMaxConnectionIdle = 5 * time.Minute
	// DefaultStreamWorkers covers the calls a busy server has in flight at once: a call a worker
	// runs starts on a stack already grown to the decision path's depth, where a goroutine of
	// its own would grow one (a tenth of a call's CPU time on the Redis store).
	DefaultStreamWorkers = 128
	// DefaultConnectionTimeout is how long a new connection has to finish its HTTP/2 preface
	// and settings, as the HTTP listeners give a request head: grpc-go's own 120 s lets a client
	// hold a descriptor per half-opened connection for two minutes.
	DefaultConnectionTimeout = 10 * time.Second
)

// ServerConfig bounds what one client connection can hold on the server; zero fields: defaults.
type ServerConfig struct {
	// MaxConcurrentStreams is the most calls (health watches among them) in flight on one
	// connection; the client waits for more.
	MaxConcurrentStreams uint32
	// KeepaliveMinTime is the least time between a client's pings; one pinging more often gets
	// GOAWAY (too_many_pings).
	KeepaliveMinTime time.Duration
	// KeepalivePermitWithoutStream lets clients ping without a call in flight (Envoy's
	// connection keepalive does); otherwise such pings count as a flood.
	KeepalivePermitWithoutStream bool
	// MaxConnectionIdle is how long a connection without a call in flight stays open before GOAWAY.
	MaxConnectionIdle time.Duration
	// StreamWorkers is the goroutines kept, across connections, to run calls; a call finding
	// them all busy gets a goroutine of its own. Negative: none, every call gets its own.
	StreamWorkers int
	// ConnectionTimeout is how long a new connection has to complete its handshake (TLS, the
	// HTTP/2 preface); then it is closed.
	ConnectionTimeout time.Duration
}

// Options returns the server options that enforce c, for NewServer.
func (c ServerConfig) Options() []grpc.ServerOption {
	if c.MaxConcurrentStreams == 0 {
		c.MaxConcurrentStreams = DefaultMaxConcurrentStreams
	}
	if c.KeepaliveMinTime <= 0 {
		c.KeepaliveMinTime = DefaultKeepaliveMinTime
	}
	if c.MaxConnectionIdle <= 0 {
		c.MaxConnectionIdle = DefaultMaxConnectionIdle
	}
	if c.StreamWorkers == 0 {
		c.StreamWorkers = DefaultStreamWorkers
	}
	if c.ConnectionTimeout <= 0 {
		c.ConnectionTimeout = DefaultConnectionTimeout
	}
	return []grpc.ServerOption{
		grpc.ConnectionTimeout(c.ConnectionTimeout),
		grpc.NumStreamWorkers(uint32(max(c.StreamWorkers, 0))),
		grpc.MaxConcurrentStreams(c.MaxConcurrentStreams),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
			MinTime: c.KeepaliveMinTime, PermitWithoutStream: c.KeepalivePermitWithoutStream,
		}),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: c.MaxConnectionIdle}),
	}
}
