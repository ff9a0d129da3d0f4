package app

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/rl-exporter/rl-exporter/collector"
	"github.com/rl-exporter/rl-exporter/config"
	"github.com/rl-exporter/rl-exporter/httplimit"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/tracing"
)

// TopLimitedPath is where the admin listener serves the most-rejected keys.
const TopLimitedPath = "/debug/top-limited"

// TelemetryInfo describes the running binary to the metrics and traces.
type TelemetryInfo struct {
	// Version and Revision label rl_exporter_build_info; Version is the traces' service.version.
	Version, Revision string
	// TraceWriter receives the stdout trace exporter's spans. Default os.Stdout.
	TraceWriter io.Writer
	// Logger receives the collector's few events. Default: discard.
	Logger *slog.Logger
}

// Telemetry is the metrics collector and the tracer provider of one serve process.
// Its methods are safe for concurrent use.
type Telemetry struct {
	// Collector counts decisions and store calls and serves /metrics.
	Collector *collector.Collector
	// Tracing hands out decision spans; disabled unless tracing.exporter is set.
	Tracing *tracing.Provider
	// Region exports the multi-region metrics; nil without region.name.
	Region *collector.Region
	logger *slog.Logger
}

// NewTelemetry builds the collector and the tracer provider cfg asks for.
// The OTLP exporters connect lazily, so an unreachable trace collector
// does not stop serve. Call Shutdown to flush the spans at exit.
func NewTelemetry(ctx context.Context, cfg *config.Config, info TelemetryInfo) (*Telemetry, error) {
	if info.TraceWriter == nil {
		info.TraceWriter = os.Stdout
	}
	if info.Logger == nil {
		info.Logger = slog.New(slog.DiscardHandler)
	}
	ratio := cfg.Tracing.SampleRatio
	tp, err := tracing.New(ctx, tracing.Config{
		Exporter: tracing.Exporter(cfg.Tracing.Exporter), Endpoint: cfg.Tracing.Endpoint,
		Insecure: cfg.Tracing.Insecure, Headers: cfg.Tracing.Headers, SampleRatio: &ratio,
		ServiceName: cfg.Tracing.ServiceName, ServiceVersion: info.Version, Writer: info.TraceWriter,
	})
	if err != nil {
		return nil, fmt.Errorf("config %s: tracing: %w", cfg.Source, err)
	}
	col, err := collector.New(collector.Config{
		Tiers: cfg.Tiers.Names, DefaultTier: cfg.Tiers.Default,
		NearLimitShare: cfg.Metrics.NearLimitShare, MaxLabelSets: cfg.Metrics.MaxLabelSets,
		NativeHistograms: cfg.Metrics.NativeHistograms,
		Exemplars:        tp.Enabled() && cfg.Metrics.Exemplars,
		Store:            cfg.Store.Type,
		Version:          info.Version, Revision: info.Revision,
		TopKeys: cfg.Metrics.TopKeys, TopWindow: cfg.Metrics.TopWindow,
		Logger: info.Logger,
	})
	if err != nil {
		_ = tp.Shutdown(ctx)
		return nil, fmt.Errorf("config %s: metrics: %w", cfg.Source, err)
	}
	t := &Telemetry{Collector: col, Tracing: tp, logger: info.Logger}
	if t.Region, err = newRegionMetrics(cfg); err == nil && t.Region != nil {
		err = t.Register(t.Region)
	}
	if err != nil {
		_ = tp.Shutdown(ctx)
		return nil, fmt.Errorf("config %s: region: %w", cfg.Source, err)
	}
	logRegions(info.Logger, cfg)
	return t, nil
}

// Register adds collectors of other parts of the process to the /metrics registry.
func (t *Telemetry) Register(cs ...prometheus.Collector) error {
	for _, c := range cs {
		if err := t.Collector.Registry().Register(c); err != nil {
			return fmt.Errorf("register metrics: %w", err)
		}
	}
	return nil
}

// Deps returns the Deps that wire the telemetry into Build: the collector as
// recorder, observer, labels and /metrics handler, the top-limited keys on the admin
// listener and, with tracing on, a span per decision and per Redis round trip.
func (t *Telemetry) Deps(logger *slog.Logger) Deps {
	col := t.Collector
	d := Deps{
		Recorder: col, Observer: col, Circuit: col, Replication: col, Failover: col, MetricsHandler: col.Handler(), Labels: col,
		AdminHandlers: map[string]http.Handler{TopLimitedPath: col.TopLimitedHandler()},
		OnPolicy: func(p *httplimit.Policy) {
			setLabels(col, t.logger, p.Endpoints(), p.Tiers(), p.DefaultTier(), p.Limits())
			setLeaseLabels(col, t.logger, p.LeaseLimits())
		},
		Logger: logger,
	}
	if t.Region != nil {
		d.Region = regionObserver{t.Region}
	}
	if t.Tracing.Enabled() {
		tp := t.Tracing
		d.Trace = func(ctx context.Context, endpoint, planTier string, alg limiter.Algorithm) (context.Context, func(limiter.Status, limiter.Decision, error)) {
			ctx, span := tp.StartDecision(ctx, endpoint, planTier, alg)
			return ctx, func(s limiter.Status, dec limiter.Decision, err error) { tracing.EndDecision(span, s, dec, err) }
		}
		d.InstrumentRedis = tp.InstrumentRedis
		d.BatchTracer = tp
	}
	return d
}

// Shutdown flushes the buffered spans and stops the trace exporter.
func (t *Telemetry) Shutdown(ctx context.Context) error { return t.Tracing.Shutdown(ctx) }

// instrumentStore hands a Redis store's client to instrument; the memory store has none.
func instrumentStore(rdb redis.UniversalClient, instrument func(redis.UniversalClient) error) error {
	if instrument == nil || rdb == nil {
		return nil
	}
	return instrument(rdb)
}

// metricsWebConfig checks the exporter-toolkit web config of /metrics, which needs
// server.metrics_listen: it applies to a whole listener, and the main one is the proxy's.
func metricsWebConfig(cfg *config.Config) (string, error) {
	path := cfg.Path(cfg.Metrics.WebConfigFile)
	if path == "" {
		return "", nil
	}
	if cfg.Server.MetricsListen == "" {
		return "", fmt.Errorf("config %s: metrics.web_config_file: needs server.metrics_listen (TLS and basic auth apply to a whole listener, and the main one is the proxy's)", cfg.Source)
	}
	if err := collector.ValidateWebConfig(path); err != nil {
		return "", fmt.Errorf("config %s: metrics.web_config_file: %w", cfg.Source, err)
	}
	return path, nil
}
