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

// ServiceName is the gRPC name of Envoy's rate limit service, as reported
// by the health service.
const ServiceName = "envoy.service.ratelimit.v3.RateLimitService"

// NewServer returns a gRPC server serving svc, the standard health service
// (SERVING for "" and ServiceName) and server reflection; over TLS when tc
// is not nil. The returned health server lets the caller report NOT_SERVING
// while shutting down. Both are safe for concurrent use.
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
	// DefaultMaxConcurrentStreams: an Envoy sends one stream per check, so
	// 100 in flight on one connection is far above what a healthy proxy
	// needs and bounds the goroutines one connection can hold.
	DefaultMaxConcurrentStreams = 100
	// DefaultKeepaliveMinTime is shorter than the keepalive interval Envoy
	// is usually given (30s and up), so its pings are never taken for a
	// flood.
	DefaultKeepaliveMinTime = 10 * time.Second
	// DefaultMaxConnectionIdle closes a connection after 5 minutes without
	// a call: an Envoy in use never reaches it (any call resets it) and
	// reconnects transparently after it, while a connection opened and left
	// holds its buffers for no longer.
	DefaultMaxConnectionIdle = 5 * time.Minute
)

// ServerConfig bounds what one client connection can hold on the server.
// Zero fields take the defaults.
type ServerConfig struct {
	// MaxConcurrentStreams is the most calls (health watches among them)
	// in flight on one connection; the client waits for more.
	MaxConcurrentStreams uint32
	// KeepaliveMinTime is the least time between a client's pings: a
	// client pinging more often gets GOAWAY (too_many_pings).
	KeepaliveMinTime time.Duration
	// KeepalivePermitWithoutStream lets clients ping a connection without
	// a call in flight (Envoy's connection keepalive does); otherwise such
	// pings count as a flood.
	KeepalivePermitWithoutStream bool
	// MaxConnectionIdle is how long a connection without a call in flight
	// stays open before the server sends GOAWAY and closes it.
	MaxConnectionIdle time.Duration
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
	return []grpc.ServerOption{
		grpc.MaxConcurrentStreams(c.MaxConcurrentStreams),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
			MinTime: c.KeepaliveMinTime, PermitWithoutStream: c.KeepalivePermitWithoutStream,
		}),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: c.MaxConnectionIdle}),
	}
}
