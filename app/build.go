package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rl-exporter/rl-exporter/admin"
	"github.com/rl-exporter/rl-exporter/collector"
	"github.com/rl-exporter/rl-exporter/config"
	"github.com/rl-exporter/rl-exporter/decision"
	"github.com/rl-exporter/rl-exporter/heartbeat"
	"github.com/rl-exporter/rl-exporter/httplimit"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
	"github.com/rl-exporter/rl-exporter/overload"
	"github.com/rl-exporter/rl-exporter/proxy"
	"github.com/rl-exporter/rl-exporter/region"
	"github.com/rl-exporter/rl-exporter/server"
)

// Deps are what the caller wires in besides the config; each may be nil.
type Deps struct {
	// Recorder is told of every decision (the collector).
	Recorder limiter.Recorder
	// Observer is told of every store call (the collector).
	Observer limiter.Observer
	// Circuit is told of every change of the store's circuit breaker.
	Circuit limiter.CircuitObserver
	// MetricsHandler serves /metrics; see Config.MetricsHandler for the default.
	MetricsHandler http.Handler
	// AdminHandlers are mounted on the admin listener.
	AdminHandlers map[string]http.Handler
	// OnPolicy is told of every policy put in force (the limits in force).
	OnPolicy func(*httplimit.Policy)
	// Sources, naming a file, are loaded again and applied when it changes (reload.watch).
	Sources *config.Sources
	// Reloads, when set, asks at each receive (one per SIGHUP) for Sources and
	// rls.config_dir to be loaded again and applied, whatever reload.watch says.
	Reloads <-chan struct{}
	// StrictSecrets refuses a config whose secret files others may read (else: a warning).
	StrictSecrets bool
	// Trace, when set, wraps every decision in a span (Telemetry.Deps sets it).
	Trace httplimit.TraceFunc
	// Labels, with server.grpc_listen, is told the HTTP routes and descriptor rules together.
	Labels EndpointLabels
	// InstrumentRedis is given each Redis client before first use.
	InstrumentRedis func(redis.UniversalClient) error
	// BatchTracer links each batch of Redis decisions to their traces.
	BatchTracer redisstore.BatchTracer
	// Replication is told of the writes no replica acknowledged in time (durability wait).
	Replication redisstore.ReplicationObserver
	// Failover is told of the decisions a Sentinel failover may have left on the demoted primary.
	Failover redisstore.FailoverObserver
	// Region, with region.name, is told of sync rounds, decisions and cross-region round trips.
	Region region.Observer
	// Logger receives the serve process's logs. Default: discard.
	Logger *slog.Logger
}

// Build opens the store the config names (memory, or Redis without
// contacting it), compiles the policy, and returns a Built with its
// listeners bound (Addr, GRPCAddr) and nothing running: Serve runs every
// part. The store is closed by Serve's end or by Shutdown.
func Build(cfg *config.Config, d Deps) (*Built, error) {
	opened, err := openStore(cfg, d)
	if err != nil {
		return nil, err
	}
	shareSt := &shareStores{redis: opened.Store, logger: cmp.Or(d.Logger, slog.New(slog.DiscardHandler))}
	// The shares give their chunks back before the Redis store is closed.
	closers := []io.Closer{shareSt, opened}
	var undo []io.Closer // what the parts of Serve close, closed here if Build fails
	fail := func(err error) (*Built, error) {
		for _, c := range append(undo, closers...) {
			_ = c.Close()
		}
		return nil, err
	}
	if err := instrumentStore(opened.Client, d.InstrumentRedis); err != nil {
		return fail(fmt.Errorf("config %s: store.redis: %w", cfg.Source, err))
	}
	webConfig, err := metricsWebConfig(cfg)
	if err != nil {
		return fail(err)
	}
	b := &Built{store: opened.Store, rdb: opened.Client, observer: d.Observer, serving: make(chan struct{}), shares: shareSt}
	if err := checkSecrets(cfg, d.StrictSecrets, d.Logger); err != nil {
		return fail(err)
	}
	hb, err := b.setupGuard(cfg, d, opened.Client)
	if err != nil {
		return fail(err)
	}
	closers = append(closers, b.guard) // logs its waiting failure summaries after the last decision
	if err := b.setupRegions(cfg, d, opened.Client); err != nil {
		return fail(err)
	}
	if b.regions != nil {
		undo = append(undo, b.regions)
	}
	if err := b.setupLive(cfg, d, opened.Client); err != nil {
		return fail(err)
	}
	b.background = b.backgroundParts(cfg, hb, opened.Client)
	if d.MetricsHandler == nil {
		d.MetricsHandler = defaultMetricsHandler(b.live.metrics)
	}
	p, err := b.policy(cfg)
	if err != nil {
		return fail(err)
	}
	if g, err := b.newGRPC(cfg, &d); err != nil {
		return fail(err)
	} else if g != nil {
		undo = append([]io.Closer{g.ln}, undo...)
	}
	ov, err := b.overload(cfg)
	if err != nil {
		return fail(err)
	}
	mw, err := httplimit.New(httplimit.Config{Policy: p, Recorder: d.Recorder, Logger: d.Logger, OnPolicy: d.OnPolicy, Trace: d.Trace,
		PassRoute: ov != nil, Costs: costRecorder(d.Recorder)})
	if err != nil {
		return fail(err)
	}
	adminHandlers, err := b.adminHandlers(cfg, d.AdminHandlers, mw)
	if err != nil {
		return fail(err)
	}
	srv, err := newServer(cfg, d, mw, opened, adminHandlers, b.authFailures, webConfig, closers, ov)
	if err != nil {
		return fail(err)
	}
	if b.grpc != nil {
		srv.CountPanics("grpc", b.grpc.panics) // before Serve and before any collection
	}
	b.mu.Lock()
	b.Server = srv
	b.mu.Unlock()
	// A live change that arrived while building is applied now.
	b.applyLive(nil)
	return b, nil
}

// newServer makes cfg's Server, with the opened store's readiness and closers.
func newServer(cfg *config.Config, d Deps, mw *httplimit.Middleware, opened OpenedStore,
	adminHandlers map[string]http.Handler, authFailures *admin.AuthFailures, webConfig string, closers []io.Closer, ov *server.Overload) (*server.Server, error) {
	var upstream *url.URL
	if cfg.Server.Upstream != "" {
		var err error
		if upstream, err = url.Parse(cfg.Server.Upstream); err != nil {
			return nil, fmt.Errorf("config %s: server.upstream: %w", cfg.Source, err)
		}
	}
	checkPeers, err := cfg.CheckAPIPeers()
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", cfg.Source, err)
	}
	checkToks, err := cfg.CheckAPITokens()
	if err != nil {
		return nil, fmt.Errorf("config %s: server.check_api: %w", cfg.Source, err)
	}
	var checkTokens []admin.Token
	for _, t := range checkToks {
		checkTokens = append(checkTokens, admin.Token{Name: t.Name, Secret: t.Token.Reveal()})
	}
	return server.New(server.Config{
		Listen: cfg.Server.Listen, MetricsListen: cfg.Server.MetricsListen, AdminListen: cfg.Server.AdminListen, AuthListen: cfg.Server.AuthListen,
		Upstream: upstream, UpstreamTransport: transportConfig(cfg.Server.UpstreamTransport),
		Middleware: mw, Ready: opened.readiness(), ReadyTimeout: cfg.Server.ReadyTimeout,
		ReadyStrict: cfg.Server.ReadyStrict, FailPolicy: cfg.Store.FailPolicy,
		ReadHeaderTimeout: cfg.Server.ReadHeaderTimeout, ReadTimeout: cfg.Server.ReadTimeout, IdleTimeout: cfg.Server.IdleTimeout,
		MaxHeaderBytes: cfg.Server.MaxHeaderBytes, MaxHeaderCount: cfg.Server.MaxHeaderCount, AuthMaxHeaderBytes: cfg.Server.AuthMaxHeaderBytes,
		CheckAPI:       server.CheckAPI{Disabled: !cfg.Server.CheckAPI.Enabled, AllowedPeers: checkPeers, Tokens: checkTokens, Prefix: cfg.Server.CheckAPI.Prefix},
		MetricsHandler: d.MetricsHandler, AdminHandlers: adminHandlers, AdminAuthFailures: authFailures, MetricsWebConfigFile: webConfig,
		ShutdownTimeout: cfg.Server.ShutdownTimeout, Closers: closers, Logger: d.Logger, Overload: ov,
	})
}

// overload is server.overload's controller, its priorities read from the
// config in force (a reload changes them); nil when off.
func (b *Built) overload(cfg *config.Config) (*server.Overload, error) {
	if !cfg.Server.Overload.Enabled || cfg.Server.Upstream == "" {
		return nil, nil
	}
	oc, err := cfg.OverloadConfig()
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", cfg.Source, err)
	}
	ctl, err := overload.New(oc)
	if err != nil {
		return nil, fmt.Errorf("config %s: server.overload.%w", cfg.Source, err)
	}
	b.priorities.Store(cfg)
	return &server.Overload{Controller: ctl, RetryAfter: cfg.Server.Overload.RetryAfter,
		Priority: func(class, tier string) overload.Priority { return b.priorities.Load().Priority(class, tier) }}, nil
}

// Built is a Server built from a config, able to reload its policy. Its
// methods are safe for concurrent use.
type Built struct {
	*server.Server
	store        limiter.Store
	rdb          redis.UniversalClient // the Redis store's client; nil for the memory store
	observer     limiter.Observer
	guard        *limiter.Guard      // shared by every policy on store, across reloads
	authFailures *admin.AuthFailures // the admin listener's refused tokens; nil without admin tokens
	regions      *regions            // nil without region.name
	shares       *shareStores        // the classes' local shares, made on first use
	mu           sync.Mutex
	live         liveState
	grpc         *grpcListener // nil unless server.grpc_listen is set
	background   []part        // run by Serve after the ways in (backgroundParts)
	serving      chan struct{} // closed once every part of Serve runs
	running      context.CancelFunc
	stopped      chan struct{}                 // closed when Serve returns
	priorities   atomic.Pointer[config.Config] // the classes' priorities in force, with server.overload
}

// Store is the store decisions are made on.
func (b *Built) Store() limiter.Store { return b.store }

// policyConfig is cfg's policy on the store, with the store's guard.
func (b *Built) policyConfig(cfg *config.Config) (httplimit.PolicyConfig, error) {
	pc, err := cfg.PolicyConfig(b.store, b.observer)
	pc.Guard = b.guard
	if err != nil {
		return pc, err
	}
	if err := b.setRegionStores(cfg, &pc); err != nil {
		return pc, err
	}
	return pc, b.shares.setShareStores(cfg, &pc)
}

// setupGuard makes the store's guard (breaker, failure summaries, local
// fallback) and, for fail_policy local on Redis, the instance heartbeat it
// divides limits by (run by Serve). Both outlive reloads.
func (b *Built) setupGuard(cfg *config.Config, d Deps, rdb redis.UniversalClient) (*heartbeat.Heartbeat, error) {
	logger := b.logger(d)
	sc := cfg.Store
	gc := limiter.GuardConfig{
		Store:  b.store.Name(),
		Logger: logger,
		Breaker: limiter.BreakerConfig{
			Threshold: sc.Breaker.Threshold, Cooldown: sc.Breaker.Cooldown, Observer: d.Circuit,
			MinFailing: limiter.DefaultMinFailing,
		},
		Local: limiter.LocalConfig{MinInstances: sc.Local.MinInstances, MaxKeys: sc.Local.MaxKeys},
	}
	if _, inProcess := b.store.(*limiter.MemoryStore); inProcess {
		gc.Breaker.Threshold = 0 // the memory store never fails
	}
	var hb *heartbeat.Heartbeat
	if rdb != nil && sc.FailPolicy == string(limiter.FailLocal) {
		var err error
		hb, err = heartbeat.New(heartbeat.Config{
			Client: rdb, Key: cmp.Or(cfg.Store.Redis.Prefix, redisstore.DefaultPrefix) + ":" + heartbeat.DefaultKeySuffix,
			Interval: sc.Local.HeartbeatInterval, TTL: sc.Local.InstanceTTL, Logger: logger,
		})
		if err != nil {
			return nil, fmt.Errorf("config %s: store.local: %w", cfg.Source, err)
		}
		gc.Local.Instances = hb
	}
	b.guard = limiter.NewGuard(gc)
	return hb, nil
}

// logger is d's logger, or one that discards.
func (*Built) logger(d Deps) *slog.Logger {
	if d.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return d.Logger
}

func (b *Built) policy(cfg *config.Config) (*httplimit.Policy, error) {
	pc, err := b.policyConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", cfg.Source, err)
	}
	p, err := b.compile(pc, nil)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", cfg.Source, err)
	}
	b.live.pc = pc
	b.shares.use(pc)
	return p, nil
}

// Reload compiles cfg's policy (routes, classes, limits, tiers, identity,
// headers) with the live changes and swaps it in atomically: a request sees
// the old policy or the new one. Other keys that differ (listeners, the
// store) are logged as needing a restart. On error the policy in force
// stays. Results are counted in ConfigMetrics.
func (b *Built) Reload(cfg *config.Config) error {
	err := b.reload(cfg)
	if err != nil {
		b.live.metrics.reloadsErr.Add(1)
		return err
	}
	b.live.metrics.reloadsOK.Add(1)
	return nil
}

// OpenedStore is a store opened from the config, with what serving needs
// beside it. Its fields are set once by OpenStore and not changed after.
type OpenedStore struct {
	// Store decides.
	Store limiter.Store
	// Client is the Redis client behind Store, for readiness checks, the
	// instance heartbeat, live limits and tracing; nil for the memory store.
	Client redis.UniversalClient
}

// Ready PINGs Redis within ctx; nil for the memory store. Safe for concurrent use.
func (o OpenedStore) Ready(ctx context.Context) error {
	if o.Client == nil {
		return nil
	}
	return o.Client.Ping(ctx).Err()
}

// readiness is Ready for a store that can fail, nil for the memory store.
func (o OpenedStore) readiness() func(context.Context) error {
	if o.Client == nil {
		return nil
	}
	return o.Ready
}

// Close closes the Redis client, if any, once the settles and releases
// sent without waiting (a proxied response's commit) are answered, for at
// most asyncFlushTimeout: those it could not send are named in the error.
// Call it once, after the last decision.
func (o OpenedStore) Close() error {
	if o.Client == nil {
		return nil
	}
	var flushed error
	if st, ok := o.Store.(*redisstore.Store); ok {
		ctx, cancel := context.WithTimeout(context.Background(), asyncFlushTimeout)
		flushed = st.Close(ctx)
		cancel()
	}
	return errors.Join(flushed, o.Client.Close())
}

// asyncFlushTimeout bounds how long closing the store waits for queued
// settles: each is one batched call under store.timeout, so a healthy Redis
// answers them all well within it, and a dead one must not hold a
// shutdown past Kubernetes' grace period.
const asyncFlushTimeout = 2 * time.Second

// OpenStore opens the store cfg names. Redis is not contacted: a Redis
// that is down at start-up makes /readyz unready and decisions follow the
// fail policy, instead of a crash loop. The caller closes what it opened.
func OpenStore(cfg *config.Config) (OpenedStore, error) {
	return openStore(cfg, Deps{})
}

// redisStoreConfig is cfg's Redis store config with d's observers, for every region's store.
func (d Deps) redisStoreConfig(cfg *config.Config) redisstore.Config {
	scfg := cfg.RedisStoreConfig()
	scfg.BatchTracer = d.BatchTracer
	scfg.ReplicationObserver = d.Replication
	scfg.FailoverObserver = d.Failover
	return scfg
}

// openStore is OpenStore with d's batch tracer and replication observer.
func openStore(cfg *config.Config, d Deps) (OpenedStore, error) {
	switch cfg.Store.Type {
	case "", "memory":
		return OpenedStore{Store: limiter.NewMemoryStore(limiter.MemoryConfig{})}, nil
	case "redis":
		cc, err := cfg.RedisClientConfig()
		if err != nil {
			return OpenedStore{}, fmt.Errorf("config %s: store.redis: %w", cfg.Source, err)
		}
		cc.Logger = d.Logger
		client, err := cc.NewClient()
		if err != nil {
			return OpenedStore{}, fmt.Errorf("config %s: store.redis: %w", cfg.Source, err)
		}
		st, err := redisstore.New(client, d.redisStoreConfig(cfg))
		if err != nil {
			_ = client.Close()
			return OpenedStore{}, fmt.Errorf("config %s: store.redis: %w", cfg.Source, err)
		}
		return OpenedStore{Store: st, Client: client}, nil
	}
	return OpenedStore{}, fmt.Errorf("config %s: store.type: unknown %q", cfg.Source, cfg.Store.Type)
}

// The collector counts the requests whose credentials identify no client.
var _ httplimit.IdentityRecorder = (*collector.Collector)(nil)

// costRecorder is the recorder's cost counting, when it has one (the collector does).
func costRecorder(r limiter.Recorder) decision.CostRecorder {
	c, _ := r.(decision.CostRecorder)
	return c
}

// transportConfig is the proxy.TransportConfig of server.upstream_transport,
// whose response_header_timeout 0 means no bound.
func transportConfig(c config.UpstreamTransport) proxy.TransportConfig {
	t := proxy.TransportConfig{
		MaxIdleConnsPerHost: c.MaxIdleConnsPerHost, IdleConnTimeout: c.IdleConnTimeout,
		DialTimeout: c.DialTimeout, ResponseHeaderTimeout: c.ResponseHeaderTimeout, H2C: c.H2C,
	}
	if t.ResponseHeaderTimeout == 0 {
		t.ResponseHeaderTimeout = -1
	}
	return t
}
