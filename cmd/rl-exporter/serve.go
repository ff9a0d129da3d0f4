package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rl-exporter/rl-exporter/app"
	"github.com/rl-exporter/rl-exporter/config"
	"github.com/rl-exporter/rl-exporter/limiter"
)

// serveFlags are the everyday settings serve takes as flags; each one given
// overrides the config file.
type serveFlags struct {
	config, listen, metricsListen, adminListen, redisURL, upstream, logFormat, logLevel string
	grpcListen                                                                          string
	strictSecrets                                                                       bool
}

// serveAbout is the description paragraph of serve's help.
const serveAbout = `Runs the rate limiter. Every request to the main listener is matched to a
class by its route, keyed by client (API key, user, or address) and plan
tier, and decided on the memory store or Redis: allowed requests are proxied
to --upstream with rate-limit headers, refused ones get 429. Services that
do their own proxying ask POST /v1/check instead. /metrics exports the
decisions for Prometheus, /healthz and /readyz answer probes, and the admin
listener (off unless set) changes limits live.

Configuration, by increasing precedence: built-in defaults, the --config
file, RL_* environment variables (RL_STORE__REDIS__URL is store.redis.url),
then these flags. The file is watched and reloaded when it changes, and
reloaded on SIGHUP (with rls.config_dir); an invalid edit, an emptied file
or one without classes leaves the running configuration in place.`

func parseServeFlags(args []string, stderr io.Writer) (serveFlags, map[string]bool, error) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f serveFlags
	fs.StringVar(&f.config, "config", "", "YAML config file (default: built-in, one class of 100 requests per minute per client)")
	fs.StringVar(&f.listen, "listen", "", "main listener address (default "+config.DefaultListen+")")
	fs.StringVar(&f.metricsListen, "metrics-listen", "", "serve /metrics, /healthz and /readyz on this address instead of --listen")
	fs.StringVar(&f.adminListen, "admin-listen", "", "admin listener address (off unless set)")
	fs.StringVar(&f.grpcListen, "grpc-listen", "", "serve Envoy's rate limit service (gRPC) on this address with the domains of rls.config_dir (off unless set)")
	fs.StringVar(&f.redisURL, "redis-url", "", "decide on Redis at this URL, e.g. redis://127.0.0.1:6379/0 (default: the in-process memory store)")
	fs.StringVar(&f.upstream, "upstream", "", "URL to proxy requests to, e.g. http://127.0.0.1:8481")
	fs.StringVar(&f.logFormat, "log-format", "", "log format: text or json (default text)")
	fs.StringVar(&f.logLevel, "log-level", "", "log level: debug, info, warn or error (default info)")
	fs.BoolVar(&f.strictSecrets, "strict-secrets", false, "refuse secret files (admin.tokens_file, password_file, key_file, secret_file) that group or others may read, at start and on reload, instead of warning")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: rl-exporter serve [flags]\n\n%s\n\nflags:\n", serveAbout)
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

// serveSources are the layers serve's config is loaded from, by increasing
// precedence: the file (or the built-in defaults), the RL_* environment, and
// the flags given. A reload loads them again.
func serveSources(f serveFlags, set map[string]bool, env environ) config.Sources {
	src := config.Sources{File: f.config, Env: env.WithPrefix(config.EnvPrefix)}
	byFlag := []struct {
		flag string
		keys map[string]any
	}{
		{"listen", map[string]any{"server.listen": f.listen}},
		{"metrics-listen", map[string]any{"server.metrics_listen": f.metricsListen}},
		{"admin-listen", map[string]any{"server.admin_listen": f.adminListen}},
		{"grpc-listen", map[string]any{"server.grpc_listen": f.grpcListen}},
		{"upstream", map[string]any{"server.upstream": f.upstream}},
		{"log-format", map[string]any{"log.format": f.logFormat}},
		{"log-level", map[string]any{"log.level": f.logLevel}},
		{"redis-url", map[string]any{
			"store.type": "redis", "store.redis.url": f.redisURL,
			"store.redis.cluster_addrs": []any{}, "store.redis.sentinel_addrs": []any{},
		}},
	}
	for _, b := range byFlag {
		if !set[b.flag] {
			continue
		}
		for k, v := range b.keys {
			src.Flags = append(src.Flags, config.Override{Key: k, Value: v, From: "--" + b.flag})
		}
	}
	return src
}

func newLogger(cfg *config.Config, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.SlogLevel()}
	if cfg.Log.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

func runServe(ctx context.Context, args []string, env environ, stdout, stderr io.Writer) int {
	f, set, err := parseServeFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		fmt.Fprintf(stderr, "rl-exporter serve: %v\n", err)
		return exitUsage
	}
	// SIGHUP reloads rather than ends the process; caught before the
	// config loads, so that one sent during the start is a reload once serving.
	reloads, stopReloads := reloadSignals(ctx)
	defer stopReloads()
	sources := serveSources(f, set, env)
	cfg, err := sources.Load()
	if err != nil {
		printConfigProblems(stderr, "serve", cmp.Or(sources.File, "the configuration"), err)
		return exitFailure
	}
	logger := newLogger(cfg, stderr)
	if cfg.EmptyFile() {
		logger.Warn("config file has no keys; serving the built-in defaults (a reload to an empty file is refused)", slog.String("file", cfg.Source))
	}
	// The Redis client's own lines go to the same handler, summarised.
	redis.SetLogger(newRedisLog(logger, limiter.DefaultLogInterval))
	tel, err := app.NewTelemetry(ctx, cfg, app.TelemetryInfo{Version: version, Revision: revision, TraceWriter: stdout, Logger: logger})
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
	deps := tel.Deps(logger)
	deps.Sources = &sources
	deps.Reloads, deps.StrictSecrets = reloads, f.strictSecrets
	srv, err := app.Build(cfg, deps)
	if err != nil {
		fmt.Fprintf(stderr, "rl-exporter serve: %v\n", err)
		return exitFailure
	}
	// rate_limit_config_errors_total, rate_limit_config_reloads_total,
	// rate_limit_slow_clients_total, rate_limit_rls_invalid_requests_total,
	// with server.overload its limit and shed requests, with rlqs.enabled
	// the quota shares, streams and expired assignments, and once a class
	// has shares their chunks, units and failed give-backs on /metrics.
	if err := tel.Register(srv.ConfigMetrics(), srv.Metrics(), srv.RLSMetrics(), srv.OverloadMetrics(), srv.QuotaMetrics(), srv.SharesMetrics()); err != nil {
		fmt.Fprintf(stderr, "rl-exporter serve: %v\n", err)
		return exitFailure
	}
	logger.Info("rl-exporter serve", slog.String("version", version), slog.String("config", cfg.Source),
		slog.String("store", srv.Store().Name()), slog.String("upstream", cfg.Server.Upstream))
	if note := defaultListenNote(cfg); note != "" {
		logger.Info(note, slog.String("listen", cfg.Server.Listen))
	}
	if cfg.Server.Overload.Enabled {
		target, q, from, _ := cfg.OverloadTarget() // checked when the config loaded
		logger.Info("overload: requests to the upstream are shed by priority past an adaptive concurrency limit",
			slog.Duration("target", target), slog.Float64("quantile", q), slog.String("target_from", from))
	}
	for _, f := range cfg.Exposure() {
		// check refuses some of these; serve starts, so that an instance
		// already deployed so keeps deciding, and says what is exposed.
		logger.Warn("exposed: "+f.Message, slog.String("key", f.Key), slog.String("config", cfg.Source))
	}
	if err := srv.Serve(ctx); err != nil {
		fmt.Fprintf(stderr, "rl-exporter serve: %v\n", err)
		return exitFailure
	}
	return exitOK
}

// reloadSignals turns each SIGHUP into a reload request until stop is
// called (or ctx ends): systemd's ExecReload=/bin/kill -HUP $MAINPID,
// supervisors and operators send it to reload, so while serve runs it
// must not end the process.
func reloadSignals(ctx context.Context) (<-chan struct{}, func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	out := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				select {
				case out <- struct{}{}:
				default: // one is pending: it reads everything afresh too
				}
			}
		}
	}()
	return out, func() {
		signal.Stop(hup)
		cancel()
		<-done
	}
}

// defaultListenNote says, when the main listener is the default, that it
// answers this host only and how to answer every interface; "" otherwise.
func defaultListenNote(cfg *config.Config) string {
	if cfg.Server.Listen != config.DefaultListen {
		return ""
	}
	_, port, _ := net.SplitHostPort(config.DefaultListen)
	return fmt.Sprintf("listening on %s, this host only (server.listen is not set); --listen :%s (or server.listen) answers on every interface", config.DefaultListen, port)
}
