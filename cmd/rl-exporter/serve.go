package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/rl-exporter/rl-exporter/config"
	"github.com/rl-exporter/rl-exporter/server"
)

func init() {
	register("serve", "run the rate limiter: reverse proxy, POST /v1/check, /metrics, /healthz, /readyz", runServe)
}

// serveFlags are the everyday settings serve takes as flags; each one given
// overrides the config file.
type serveFlags struct {
	config, listen, metricsListen, adminListen, redisURL, upstream, logFormat, logLevel string
}

func parseServeFlags(args []string, stderr io.Writer) (serveFlags, map[string]bool, error) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f serveFlags
	fs.StringVar(&f.config, "config", "", "YAML config file (default: built-in, one class of 100 requests per minute per client)")
	fs.StringVar(&f.listen, "listen", "", "main listener address (default "+config.DefaultListen+")")
	fs.StringVar(&f.metricsListen, "metrics-listen", "", "serve /metrics, /healthz and /readyz on this address instead of --listen")
	fs.StringVar(&f.adminListen, "admin-listen", "", "admin listener address (off unless set)")
	fs.StringVar(&f.redisURL, "redis-url", "", "decide on Redis at this URL, e.g. redis://127.0.0.1:6379/0 (default: the in-process memory store)")
	fs.StringVar(&f.upstream, "upstream", "", "URL to proxy requests to, e.g. http://127.0.0.1:8481")
	fs.StringVar(&f.logFormat, "log-format", "", "log format: text or json (default text)")
	fs.StringVar(&f.logLevel, "log-level", "", "log level: debug, info, warn or error (default info)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: rl-exporter serve [flags]\n\nflags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return f, nil, err
	}
	if fs.NArg() > 0 {
		return f, nil, fmt.Errorf("serve takes no arguments, got %q", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	return f, set, nil
}

// loadServeConfig loads the config file (or the defaults) and applies the flags.
func loadServeConfig(f serveFlags, set map[string]bool) (*config.Config, error) {
	cfg := config.Default()
	if f.config != "" {
		var err error
		if cfg, err = config.Load(f.config); err != nil {
			return nil, err
		}
	}
	apply := map[string]func(){
		"listen":         func() { cfg.Server.Listen = f.listen },
		"metrics-listen": func() { cfg.Server.MetricsListen = f.metricsListen },
		"admin-listen":   func() { cfg.Server.AdminListen = f.adminListen },
		"upstream":       func() { cfg.Server.Upstream = f.upstream },
		"log-format":     func() { cfg.Log.Format = f.logFormat },
		"log-level":      func() { cfg.Log.Level = f.logLevel },
		"redis-url": func() {
			cfg.Store.Type = "redis"
			cfg.Store.Redis.URL = f.redisURL
			cfg.Store.Redis.ClusterAddrs, cfg.Store.Redis.SentinelAddrs = nil, nil
		},
	}
	applied := false
	for name, fn := range apply {
		if set[name] {
			fn()
			applied = true
		}
	}
	if applied {
		if err := cfg.Validate(); err != nil {
			return nil, fmt.Errorf("%w (after command-line flags)", err)
		}
	}
	return cfg, nil
}

func newLogger(cfg *config.Config, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.SlogLevel()}
	if cfg.Log.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

func runServe(ctx context.Context, args []string, _ func(string) string, stdout, stderr io.Writer) int {
	f, set, err := parseServeFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		fmt.Fprintf(stderr, "rl-exporter serve: %v\n", err)
		return exitUsage
	}
	cfg, err := loadServeConfig(f, set)
	if err != nil {
		fmt.Fprintf(stderr, "rl-exporter serve: %v\n", err)
		return exitFailure
	}
	logger := newLogger(cfg, stderr)
	tel, err := server.NewTelemetry(ctx, cfg, server.TelemetryInfo{Version: version, Revision: revision, TraceWriter: stdout, Logger: logger})
	if err != nil {
		fmt.Fprintf(stderr, "rl-exporter serve: %v\n", err)
		return exitFailure
	}
	defer func() {
		// Flush the last spans, without letting a dead trace collector hold the exit.
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := tel.Shutdown(sctx); err != nil {
			logger.Warn("tracing shutdown", slog.String("error", err.Error()))
		}
	}()
	srv, err := server.Build(cfg, tel.Deps(logger))
	if err != nil {
		fmt.Fprintf(stderr, "rl-exporter serve: %v\n", err)
		return exitFailure
	}
	logger.Info("rl-exporter serve", slog.String("version", version), slog.String("config", cfg.Source),
		slog.String("store", srv.Store().Name()), slog.String("upstream", cfg.Server.Upstream))
	if err := srv.Serve(ctx); err != nil {
		fmt.Fprintf(stderr, "rl-exporter serve: %v\n", err)
		return exitFailure
	}
	return exitOK
}
