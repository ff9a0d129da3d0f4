package app

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A gRPC call that panics is answered Internal, logged once with its stack and counted; left
// to grpc-go, the panic would end the process and every call of every Envoy with it.
func TestAPanickingGRPCCallIsAnsweredInternalLoggedOnceAndCounted(t *testing.T) {
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	panics := &atomic.Uint64{}
	info := &grpc.UnaryServerInfo{FullMethod: "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"}
	resp, err := recoverUnary(panics, logger)(context.Background(), nil, info, func(context.Context, any) (any, error) {
		panic("boom: a bug in a descriptor")
	})
	if resp != nil || status.Code(err) != codes.Internal {
		t.Errorf("answer %v, %v; want no response and Internal", resp, err)
	}
	stream := &grpc.StreamServerInfo{FullMethod: "/grpc.health.v1.Health/Watch"}
	err = recoverStream(panics, logger)(nil, fakeStream{}, stream, func(any, grpc.ServerStream) error { panic("boom: a bug in a stream") })
	if status.Code(err) != codes.Internal {
		t.Errorf("stream answer %v, want Internal", err)
	}
	if n := panics.Load(); n != 2 {
		t.Errorf("%d panics counted, want 2", n)
	}
	if n := strings.Count(logs.String(), "panic serving a request"); n != 2 || !strings.Contains(logs.String(), "goroutine ") {
		t.Errorf("log %q: want one line with its stack per panic", logs.String())
	}
}

// fakeStream is a grpc.ServerStream whose context is the background one.
type fakeStream struct{ grpc.ServerStream }

func (fakeStream) Context() context.Context { return context.Background() }
