package app

import (
	"context"
	"log/slog"
	"runtime/debug"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// recoverUnary is the gRPC listener's unary interceptor: a panicking call is answered
// Internal, logged once with its stack and counted in panics; grpc-go would let it end the
// process.
func recoverUnary(panics *atomic.Uint64, logger *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
		defer func() {
			if p := recover(); p != nil {
				resp, err = nil, recoveredCall(ctx, panics, logger, info.FullMethod, p)
			}
		}()
		return handler(ctx, req)
	}
}

// recoverStream is recoverUnary for streaming calls (the health service's Watch).
func recoverStream(panics *atomic.Uint64, logger *slog.Logger) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
		defer func() {
			if p := recover(); p != nil {
				err = recoveredCall(ss.Context(), panics, logger, info.FullMethod, p)
			}
		}()
		return handler(srv, ss)
	}
}

// recoveredCall counts and logs the panic p of a call to method and returns its Internal status.
func recoveredCall(ctx context.Context, panics *atomic.Uint64, logger *slog.Logger, method string, p any) error {
	panics.Add(1)
	logger.LogAttrs(ctx, slog.LevelError, "panic serving a request", slog.String("listener", "grpc"),
		slog.String("method", method), slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
	return status.Error(codes.Internal, "an internal error; it is logged")
}
