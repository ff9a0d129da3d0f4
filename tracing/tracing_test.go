package tracing

import (
	"bytes"
	"context"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/rl-exporter/rl-exporter/limiter"
)

func TestDisabledProviderCostsNothing(t *testing.T) {
	p, err := New(context.Background(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]*Provider{"the zero Config": p, "a nil Provider": nil, "Disabled()": Disabled()} {
		t.Run(name, func(t *testing.T) {
			if p.Enabled() {
				t.Fatal("enabled")
			}
			ctx := context.Background()
			got, span := p.StartDecision(ctx, "/v1/search", "free", limiter.GCRA)
			if got != ctx || span.IsRecording() || span.SpanContext().IsValid() {
				t.Errorf("StartDecision returned a new context or a real span")
			}
			n := testing.AllocsPerRun(1000, func() {
				_, span := p.StartDecision(ctx, "/v1/search", "free", limiter.GCRA)
				EndDecision(span, limiter.StatusAllowed, limiter.Decision{Allowed: true}, nil)
			})
			if n != 0 {
				t.Errorf("%v allocations per disabled decision span, want 0", n)
			}
			if err := p.Shutdown(ctx); err != nil {
				t.Errorf("Shutdown: %v", err)
			}
			if p.TracerProvider() == nil {
				t.Error("TracerProvider is nil")
			}
		})
	}
}

func TestBadConfigIsRefused(t *testing.T) {
	half, two := 0.5, 2.0
	cases := []struct {
		name string
		cfg  Config
		want string
	}{
		{"an unknown exporter", Config{Exporter: "jaeger"}, `unknown trace exporter "jaeger"`},
		{"a sample ratio above one", Config{Exporter: ExporterStdout, SampleRatio: &two}, "sample ratio"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(context.Background(), tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New = %v, want an error containing %q", err, tc.want)
			}
		})
	}
	p, err := New(context.Background(), Config{Exporter: ExporterStdout, SampleRatio: &half, Writer: io.Discard})
	if err != nil {
		t.Fatalf("a valid ratio: %v", err)
	}
	_ = p.Shutdown(context.Background())
}

func attrs(kvs []attribute.KeyValue) map[string]string {
	out := map[string]string{}
	for _, kv := range kvs {
		out[string(kv.Key)] = kv.Value.Emit()
	}
	return out
}

func TestDecisionSpanCarriesTheDecision(t *testing.T) {
	spans := tracetest.NewInMemoryExporter()
	p := NewWithSDK(sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans)))
	defer p.Shutdown(context.Background())

	_, span := p.StartDecision(context.Background(), "/v1/search", "pro", limiter.TokenBucket)
	EndDecision(span, limiter.StatusAllowed, limiter.Decision{Allowed: true, Limit: 100, Remaining: 42}, nil)
	_, span = p.StartDecision(context.Background(), "/v1/search", "pro", limiter.TokenBucket)
	EndDecision(span, limiter.StatusFailOpen, limiter.Decision{Allowed: true, Limit: 100, Remaining: 100, Failure: limiter.FailureOpen}, context.DeadlineExceeded)

	got := spans.GetSpans()
	if len(got) != 2 {
		t.Fatalf("%d spans, want 2", len(got))
	}
	want := []map[string]string{
		{"rate_limit.endpoint": "/v1/search", "rate_limit.plan_tier": "pro", "rate_limit.algorithm": "token_bucket",
			"rate_limit.allowed": "true", "rate_limit.remaining": "42", "rate_limit.limit": "100", "rate_limit.fail_open": "false", "rate_limit.status": "allowed"},
		{"rate_limit.allowed": "true", "rate_limit.remaining": "100", "rate_limit.fail_open": "true", "rate_limit.status": "fail_open"},
	}
	for i, s := range got {
		if s.Name != DecisionSpanName {
			t.Errorf("span %d name %q", i, s.Name)
		}
		a := attrs(s.Attributes)
		for k, v := range want[i] {
			if a[k] != v {
				t.Errorf("span %d %s = %q, want %q", i, k, a[k], v)
			}
		}
	}
	if got[1].Status.Description != "timeout" || len(got[1].Events) == 0 {
		t.Errorf("fail-open span status %+v events %d, want an error status \"timeout\" and the recorded error", got[1].Status, len(got[1].Events))
	}
}

func TestStdoutExporterWritesSpans(t *testing.T) {
	var buf syncBuffer
	p, err := New(context.Background(), Config{Exporter: ExporterStdout, Writer: &buf, ServiceVersion: "1.2.3"})
	if err != nil {
		t.Fatal(err)
	}
	_, span := p.StartDecision(context.Background(), "/v1/search", "free", limiter.GCRA)
	EndDecision(span, limiter.StatusRejected, limiter.Decision{Limit: 10}, nil)
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{`"Name":"rate_limit.decision"`, `"rate_limit.status"`, `"rejected"`, `"service.version"`, `"1.2.3"`} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout export lacks %s:\n%.600s", want, out)
		}
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// received collects the spans an in-process OTLP receiver got.
type received struct {
	mu    sync.Mutex
	spans []*tracepb.Span
}

func (r *received) add(req *collectortrace.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			r.spans = append(r.spans, ss.GetSpans()...)
		}
	}
}

func (r *received) get() []*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*tracepb.Span(nil), r.spans...)
}

type grpcReceiver struct {
	collectortrace.UnimplementedTraceServiceServer
	got *received
}

func (g grpcReceiver) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	g.got.add(req)
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

func TestOTLPExportReachesAReceiver(t *testing.T) {
	got := &received{}
	// OTLP/HTTP receiver.
	httpRecv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/traces" {
			http.NotFound(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		var req collectortrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		got.add(&req)
		out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	defer httpRecv.Close()
	// OTLP/gRPC receiver.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(gs, grpcReceiver{got: got})
	go func() { _ = gs.Serve(l) }()
	defer gs.Stop()

	cases := []struct {
		name string
		cfg  Config
	}{
		{"otlp-http to a URL", Config{Exporter: ExporterOTLPHTTP, Endpoint: httpRecv.URL + "/v1/traces"}},
		{"otlp-http to host:port", Config{Exporter: ExporterOTLPHTTP, Endpoint: strings.TrimPrefix(httpRecv.URL, "http://"), Insecure: true}},
		{"otlp-grpc to host:port", Config{Exporter: ExporterOTLPGRPC, Endpoint: l.Addr().String(), Insecure: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := len(got.get())
			tc.cfg.ExportTimeout = 5 * time.Second
			p, err := New(context.Background(), tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			_, span := p.StartDecision(context.Background(), "/v1/search", "free", limiter.SlidingWindow)
			EndDecision(span, limiter.StatusAllowed, limiter.Decision{Allowed: true, Limit: 5, Remaining: 4}, nil)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := p.Shutdown(ctx); err != nil {
				t.Fatalf("Shutdown (flushes the export): %v", err)
			}
			spans := got.get()[before:]
			if len(spans) != 1 {
				t.Fatalf("receiver got %d spans, want 1", len(spans))
			}
			if spans[0].GetName() != DecisionSpanName || hex.EncodeToString(spans[0].GetTraceId()) != span.SpanContext().TraceID().String() {
				t.Errorf("received %s (trace %x), want %s (trace %s)", spans[0].GetName(), spans[0].GetTraceId(), DecisionSpanName, span.SpanContext().TraceID())
			}
		})
	}
}
