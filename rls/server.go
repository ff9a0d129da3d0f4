package rls

import (
	"crypto/tls"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
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
