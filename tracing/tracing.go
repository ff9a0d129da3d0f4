// Package tracing sets up OpenTelemetry tracing for rl-exporter: a tracer
// provider exporting over OTLP (gRPC or HTTP) or to a writer as JSON, spans
// for rate-limit decisions, and go-redis instrumentation for the store's
// round trips.
//
// Tracing is off by default. A disabled (or nil) *Provider hands out
// no-op spans after a single branch, so callers need no conditionals of
// their own. The provider is never installed as the global OpenTelemetry
// provider: whoever needs it is given it.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/extra/redisotel/v9"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// Exporter names where spans go.
type Exporter string

// The exporters.
const (
	// ExporterNone turns tracing off (the default).
	ExporterNone Exporter = "none"
	// ExporterOTLPGRPC sends spans over OTLP/gRPC (default endpoint localhost:4317).
	ExporterOTLPGRPC Exporter = "otlp-grpc"
	// ExporterOTLPHTTP sends spans over OTLP/HTTP (default endpoint localhost:4318).
	ExporterOTLPHTTP Exporter = "otlp-http"
	// ExporterStdout writes each span as JSON to Config.Writer.
	ExporterStdout Exporter = "stdout"
)

// ParseExporter returns the Exporter named s ("" means none).
func ParseExporter(s string) (Exporter, error) {
	switch e := Exporter(s); e {
	case "":
		return ExporterNone, nil
	case ExporterNone, ExporterOTLPGRPC, ExporterOTLPHTTP, ExporterStdout:
		return e, nil
	}
	return "", fmt.Errorf("unknown trace exporter %q (want none, otlp-grpc, otlp-http or stdout)", s)
}

// Config configures tracing. The zero value is tracing off.
type Config struct {
	// Exporter selects where spans go. Default ExporterNone.
	Exporter Exporter
	// Endpoint is the OTLP collector: host:port, or a URL
	// (http://host:4318/v1/traces) whose scheme also decides TLS.
	// Default: the exporter's own (localhost:4317 or localhost:4318).
	Endpoint string
	// Insecure sends OTLP without TLS when Endpoint is host:port.
	Insecure bool
	// Headers are sent with every OTLP export (e.g. an API key).
	Headers map[string]string
	// SampleRatio is the share of new traces sampled, in [0, 1]; traces
	// started upstream follow their parent's decision. Default
	// DefaultSampleRatio (nil).
	SampleRatio *float64
	// ServiceName and ServiceVersion describe this process in the
	// resource. Defaults DefaultServiceName and "unknown".
	ServiceName, ServiceVersion string
	// Writer receives the stdout exporter's JSON. Default os.Stdout.
	Writer io.Writer
	// ExportTimeout bounds one export. Default 10s.
	ExportTimeout time.Duration
}

// Defaults of Config.
const (
	// DefaultSampleRatio samples every new trace: the collector, or
	// SampleRatio, thins them.
	DefaultSampleRatio = 1.0
	// DefaultServiceName names this process in the traces' resource.
	DefaultServiceName = "rl-exporter"
)

// Provider hands out tracers and decision spans. A nil or disabled
// Provider is a valid no-op one. Safe for concurrent use.
type Provider struct {
	enabled bool
	sdk     *sdktrace.TracerProvider
	tp      trace.TracerProvider
	tracer  trace.Tracer
}

// tracerName is the instrumentation scope of rl-exporter's own spans.
const tracerName = "github.com/rl-exporter/rl-exporter"

// New builds the Provider cfg asks for; with ExporterNone it is a no-op
// Provider. The exporters connect lazily: an unreachable collector does not
// fail New, only exports (dropped spans, not blocked requests). The OTLP
// exporters also honour the standard OTEL_EXPORTER_OTLP_* environment
// variables where cfg leaves a setting empty.
func New(ctx context.Context, cfg Config) (*Provider, error) {
	exp, err := ParseExporter(string(cfg.Exporter))
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	if exp == ExporterNone {
		return Disabled(), nil
	}
	ratio := DefaultSampleRatio
	if cfg.SampleRatio != nil {
		ratio = *cfg.SampleRatio
		if !(ratio >= 0 && ratio <= 1) {
			return nil, fmt.Errorf("tracing: sample ratio: must be in [0, 1], got %v", ratio)
		}
	}
	if cfg.ServiceName == "" {
		cfg.ServiceName = DefaultServiceName
	}
	if cfg.ServiceVersion == "" {
		cfg.ServiceVersion = "unknown"
	}
	if cfg.ExportTimeout == 0 {
		cfg.ExportTimeout = 10 * time.Second
	}
	var se sdktrace.SpanExporter
	switch exp {
	case ExporterOTLPGRPC:
		opts := []otlptracegrpc.Option{otlptracegrpc.WithTimeout(cfg.ExportTimeout)}
		if strings.Contains(cfg.Endpoint, "://") {
			opts = append(opts, otlptracegrpc.WithEndpointURL(cfg.Endpoint))
		} else if cfg.Endpoint != "" {
			opts = append(opts, otlptracegrpc.WithEndpoint(cfg.Endpoint))
		}
		if cfg.Insecure {
			opts = append(opts, otlptracegrpc.WithInsecure())
		}
		if len(cfg.Headers) > 0 {
			opts = append(opts, otlptracegrpc.WithHeaders(cfg.Headers))
		}
		se, err = otlptracegrpc.New(ctx, opts...)
	case ExporterOTLPHTTP:
		opts := []otlptracehttp.Option{otlptracehttp.WithTimeout(cfg.ExportTimeout)}
		if strings.Contains(cfg.Endpoint, "://") {
			opts = append(opts, otlptracehttp.WithEndpointURL(cfg.Endpoint))
		} else if cfg.Endpoint != "" {
			opts = append(opts, otlptracehttp.WithEndpoint(cfg.Endpoint))
		}
		if cfg.Insecure {
			opts = append(opts, otlptracehttp.WithInsecure())
		}
		if len(cfg.Headers) > 0 {
			opts = append(opts, otlptracehttp.WithHeaders(cfg.Headers))
		}
		se, err = otlptracehttp.New(ctx, opts...)
	case ExporterStdout:
		w := cfg.Writer
		if w == nil {
			w = os.Stdout
		}
		se, err = stdouttrace.New(stdouttrace.WithWriter(w))
	}
	if err != nil {
		return nil, fmt.Errorf("tracing: %s exporter %s: %w", exp, cfg.Endpoint, err)
	}
	res := resource.NewSchemaless(
		attribute.String("service.name", cfg.ServiceName),
		attribute.String("service.version", cfg.ServiceVersion),
	)
	return NewWithSDK(sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(se, sdktrace.WithExportTimeout(cfg.ExportTimeout)),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio))),
	)), nil
}

// NewWithSDK wraps a tracer provider built by the caller (tests use one
// with an in-memory exporter). Shutdown shuts it down.
func NewWithSDK(tp *sdktrace.TracerProvider) *Provider {
	return &Provider{enabled: true, sdk: tp, tp: tp, tracer: tp.Tracer(tracerName)}
}

var disabled = &Provider{tp: noop.NewTracerProvider()}

// Disabled returns the no-op Provider.
func Disabled() *Provider { return disabled }

// Enabled reports whether spans are recorded and exported. Pass it as
// collector.Config.Exemplars.
func (p *Provider) Enabled() bool { return p != nil && p.enabled }

// TracerProvider returns the provider for other instrumentation (a no-op
// one when disabled).
func (p *Provider) TracerProvider() trace.TracerProvider {
	if !p.Enabled() {
		return disabled.tp
	}
	return p.tp
}

// Propagator is the W3C trace-context and baggage propagator, for reading
// a caller's traceparent and passing it upstream.
func (p *Provider) Propagator() propagation.TextMapPropagator {
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
}

// ForceFlush exports the spans that are buffered. No-op when disabled.
func (p *Provider) ForceFlush(ctx context.Context) error {
	if !p.Enabled() {
		return nil
	}
	return p.sdk.ForceFlush(ctx)
}

// Shutdown flushes and stops the exporter. No-op when disabled.
func (p *Provider) Shutdown(ctx context.Context) error {
	if !p.Enabled() {
		return nil
	}
	if err := p.sdk.Shutdown(ctx); err != nil {
		return fmt.Errorf("tracing: shutdown: %w", err)
	}
	return nil
}

// Span attribute keys of a decision span.
const (
	AttrEndpoint  = attribute.Key("rate_limit.endpoint")
	AttrPlanTier  = attribute.Key("rate_limit.plan_tier")
	AttrAlgorithm = attribute.Key("rate_limit.algorithm")
	AttrAllowed   = attribute.Key("rate_limit.allowed")
	AttrRemaining = attribute.Key("rate_limit.remaining")
	AttrLimit     = attribute.Key("rate_limit.limit")
	AttrFailOpen  = attribute.Key("rate_limit.fail_open")
	AttrStatus    = attribute.Key("rate_limit.status")
)

// DecisionSpanName is the name of the span StartDecision starts.
const DecisionSpanName = "rate_limit.decision"

// StartDecision starts the span of one rate-limit decision; call the
// limiter with the returned context (so the store's spans and the latency
// exemplar belong to it) and then EndDecision. Disabled, it returns ctx and
// a no-op span after one branch. The client's key is never recorded.
func (p *Provider) StartDecision(ctx context.Context, endpoint, planTier string, algorithm limiter.Algorithm) (context.Context, trace.Span) {
	if !p.Enabled() {
		return ctx, noopSpan
	}
	return p.tracer.Start(ctx, DecisionSpanName, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(AttrEndpoint.String(endpoint), AttrPlanTier.String(planTier), AttrAlgorithm.String(string(algorithm))))
}

var noopSpan = trace.SpanFromContext(context.Background())

// EndDecision records the decision on span (allowed, remaining, limit,
// fail-open, status; the store error, if any, as the span's error) and
// ends it. A no-op span costs one branch.
func EndDecision(span trace.Span, status limiter.Status, d limiter.Decision, err error) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(
		AttrAllowed.Bool(d.Allowed),
		AttrRemaining.Int64(d.Remaining),
		AttrLimit.Int64(d.Limit),
		AttrFailOpen.Bool(d.Failure == limiter.FailureOpen),
		AttrStatus.String(string(status)),
	)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, limiter.ErrorKind(err))
	}
	span.End()
}

// ErrNilClient is returned by InstrumentRedis for a nil client.
var ErrNilClient = errors.New("tracing: nil redis client")

// InstrumentRedis adds a span per command and per pipeline to a go-redis
// client (single, Sentinel-backed or Cluster) with the go-redis
// OpenTelemetry hook. Statements are not recorded: they carry users' keys.
// Disabled, it leaves the client alone. Call it once per client, before use.
func (p *Provider) InstrumentRedis(rdb redis.UniversalClient) error {
	if rdb == nil {
		return ErrNilClient
	}
	if !p.Enabled() {
		return nil
	}
	if err := redisotel.InstrumentTracing(rdb,
		redisotel.WithTracerProvider(p.tp),
		redisotel.WithDBStatement(false),
		redisotel.WithCallerEnabled(false),
	); err != nil {
		return fmt.Errorf("tracing: instrument redis: %w", err)
	}
	return nil
}
