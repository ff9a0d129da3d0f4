package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/rl-exporter/rl-exporter/collector"
	"github.com/rl-exporter/rl-exporter/config"
	"github.com/rl-exporter/rl-exporter/httplimit"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/livelimits"
	"github.com/rl-exporter/rl-exporter/rlqs"
	"github.com/rl-exporter/rl-exporter/rls"
	"github.com/rl-exporter/rl-exporter/server"
)

// EndpointLabels is the part of the collector told which endpoint labels exist
// and the limit in force on each. With the gRPC listener on, the HTTP routes and
// descriptor rules are given together, so that a change of either keeps the
// other's counts. Implementations are safe for concurrent use.
type EndpointLabels interface {
	// Reconfigure replaces the configured endpoints, tiers and default tier.
	Reconfigure(endpoints, tiers []string, defaultTier string) error
	// SetLimit sets the limit in force for an endpoint and tier.
	SetLimit(endpoint, tier string, lim limiter.Limit) error
}

// NamedLimitLabels is EndpointLabels told each limit's name, and every limit of a tier of
// several at once: the collector's limit label. Implementations are safe for concurrent use.
type NamedLimitLabels interface {
	EndpointLabels
	// SetLimits sets the limits in force for an endpoint and tier, each by its name.
	SetLimits(endpoint, tier string, limits []collector.NamedLimit) error
}

// grpcListener is Envoy's rate limit service on server.grpc_listen: bound by
// Build, served by its part of Built.Serve (run), stopped after the HTTP drain.
type grpcListener struct {
	ln            net.Listener
	panics        *atomic.Uint64 // panics its calls recovered
	newServer     func() (*grpc.Server, *health.Server)
	svc           *rls.Service
	quota         *rlqs.Service // nil unless rlqs.enabled
	drain         time.Duration
	logger        *slog.Logger
	live          *livelimits.Cache // nil when live limits are off
	reloads       chan struct{}     // a send reloads rls.config_dir (SIGHUP); capacity 1
	watcher       *rls.Watcher
	interval      time.Duration // of the directory watch; 0: reloads alone
	reload        func()        // reloads rls.config_dir
	relabelNeeded <-chan struct{}

	labels          EndpointLabels
	labelsMu        sync.Mutex
	policy          *httplimit.Policy // the HTTP policy in force, under labelsMu
	tiers           []string
	defaultTierName string
}

// newGRPC opens server.grpc_listen and loads rls.config_dir; nil without
// server.grpc_listen. It decides on the HTTP policy's engine, so that both ways
// in decide alike, and wraps d.OnPolicy to follow each policy (followPolicy).
func (b *Built) newGRPC(cfg *config.Config, d *Deps) (*grpcListener, error) {
	if cfg.Server.GRPCListen == "" {
		return nil, nil
	}
	logger := d.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	dir := cfg.RLSConfigDir()
	watcher := rls.NewWatcher(dir)
	rules, err := rls.LoadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("config %s: rls.config_dir: %w", cfg.Source, err)
	}
	relabelNeeded := make(chan struct{}, 1)
	svc, err := b.newRLSService(cfg, d, rules, logger, relabelNeeded)
	if err != nil {
		return nil, fmt.Errorf("config %s: rls.config_dir: %w", cfg.Source, err)
	}
	tc, err := cfg.GRPCTLSConfig()
	if err != nil {
		return nil, fmt.Errorf("config %s: server.grpc_tls: %w", cfg.Source, err)
	}
	ln, err := net.Listen("tcp", cfg.Server.GRPCListen)
	if err != nil {
		return nil, fmt.Errorf("server: grpc listener %s: %w", cfg.Server.GRPCListen, err)
	}
	// Envoy's metadata is bounded like an HTTP request's head.
	opts := append(rls.ServerConfig{
		MaxConcurrentStreams:         uint32(cfg.RLS.MaxConcurrentStreams),
		KeepaliveMinTime:             cfg.RLS.KeepaliveMinTime,
		KeepalivePermitWithoutStream: cfg.RLS.KeepalivePermitWithoutStream,
		MaxConnectionIdle:            cfg.RLS.MaxConnectionIdle,
	}.Options(), grpc.MaxHeaderListSize(uint32(cfg.Server.MaxHeaderBytes)))
	// The server is made in run: its stream workers are goroutines, and
	// Build starts none.
	panics := &atomic.Uint64{}
	opts = append(opts, grpc.ChainUnaryInterceptor(recoverUnary(panics, logger)), grpc.ChainStreamInterceptor(recoverStream(panics, logger)))
	q, err := b.newRLQS(cfg, rules, logger)
	if err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("config %s: rlqs: %w", cfg.Source, err)
	}
	newServer := func() (*grpc.Server, *health.Server) {
		gs, hs := rls.NewServer(svc, tc, opts...)
		if q != nil {
			// Beside the rate limit service: the same listener, TLS and bounds on streams,
			// messages and keepalive.
			rlqsv3.RegisterRateLimitQuotaServiceServer(gs, q)
			hs.SetServingStatus(rlqs.ServiceName, healthpb.HealthCheckResponse_SERVING)
		}
		return gs, hs
	}
	g := &grpcListener{ln: ln, newServer: newServer, svc: svc, quota: q, drain: cfg.Server.ShutdownTimeout, logger: logger, panics: panics,
		watcher: watcher, reloads: make(chan struct{}, 1), relabelNeeded: relabelNeeded}
	if g.drain <= 0 {
		g.drain = server.DefaultShutdownTimeout
	}
	if cfg.Reload.Watch {
		g.interval = cfg.Reload.Interval
	}
	g.reload = func() { b.reloadRLS(g, dir) }
	b.followPolicy(g, cfg, d, rules)
	logger.Info("listening", slog.String("listener", "grpc"), slog.String("addr", ln.Addr().String()),
		slog.Bool("tls", tc != nil), slog.String("rls_config_dir", dir), slog.Any("domains", rules.Domains()), slog.Bool("rlqs", q != nil))
	b.mu.Lock()
	b.grpc = g
	b.mu.Unlock()
	return g, nil
}

// newRLSService builds the rate limit service of rules on the HTTP policy's engine.
// A new detailed_metric label signals relabelNeeded, to relabel off the decision path.
func (b *Built) newRLSService(cfg *config.Config, d *Deps, rules *rls.Rules, logger *slog.Logger, relabelNeeded chan<- struct{}) (*rls.Service, error) {
	pc := b.live.pc
	// detailed_metric labels get the room the cardinality cap leaves beside
	// the configured endpoints (each label set is an endpoint × a tier).
	configured := 2 + len(rules.Limits()) // "other" and the catch-all route
	for _, c := range pc.Classes {
		configured += len(c.Routes)
	}
	engine := pc.Engine()
	engine.Store = b.store
	return rls.New(rls.Config{
		MaxDetailedEndpoints: max(0, cfg.Metrics.MaxLabelSets/max(1, len(pc.Tiers))-configured),
		OnDetailedEndpoint: func(string) {
			select {
			case relabelNeeded <- struct{}{}:
			default:
			}
		},
		Engine: engine, Recorder: d.Recorder, ResponseHeaders: cfg.RLS.ResponseHeaders, Headers: pc.Headers,
		Tiers: pc.Tiers, DefaultTier: pc.DefaultTier, TierDescriptorKey: cfg.RLS.TierDescriptorKey, Trace: d.Trace, Logger: logger,
		MaxDescriptors: cfg.RLS.MaxDescriptors, MaxEntries: cfg.RLS.MaxEntries, MaxOverrides: cfg.RLS.MaxOverrides,
		Costs: costRecorder(d.Recorder), AllOrNothing: cfg.RLS.AllOrNothing,
	}, rules)
}

// followPolicy makes g follow the HTTP side: every policy put in force (a reload,
// a live change) brings its header switches and the live changes to the
// descriptors and, with d.Labels, relabels the endpoints.
func (b *Built) followPolicy(g *grpcListener, cfg *config.Config, d *Deps, rules *rls.Rules) {
	if b.live.cache != nil {
		// The descriptor rules become live-limit classes: read their hashes
		// now, so that a change made before start applies from the first call.
		g.live = b.live.cache
		g.live.SetTargets(append(targets(cfg), rlsTargets(rules, cfg)...))
		g.refreshLive()
	}
	next := d.OnPolicy
	if d.Labels != nil {
		pc := b.live.pc
		g.labels, g.tiers, g.defaultTierName = d.Labels, pc.Tiers, pc.DefaultTier
		g.relabel(nil)
		next = g.relabel
	}
	d.OnPolicy = func(p *httplimit.Policy) {
		g.svc.SetHeaders(p.HeaderConfig())
		g.applyLive()
		if next != nil {
			next(p)
		}
	}
}

// run serves gRPC, watches rls.config_dir and relabels new detailed_metric labels
// (their first decisions may count as "other") until ctx is done; then it reports
// NOT_SERVING and lets in-flight calls finish for up to the shutdown timeout.
func (g *grpcListener) run(ctx context.Context, ready func()) error {
	var wg sync.WaitGroup
	gs, hs := g.newServer()
	served := make(chan error, 1)
	go func() { served <- gs.Serve(g.ln) }()
	wg.Go(func() { g.watcher.Run(ctx, g.interval, g.reloads, g.reload) })
	if g.quota != nil {
		wg.Go(func() { g.quota.Run(ctx) })
	}
	if g.labels != nil {
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-g.relabelNeeded:
					g.relabel(nil)
				}
			}
		})
	}
	ready()
	var err error
	select {
	case <-ctx.Done():
	case err = <-served:
	}
	hs.Shutdown()
	drainBy := time.Now().Add(g.drain)
	if g.quota != nil {
		// Quota streams last as long as their Envoy: ended now, they move to another replica
		// instead of holding the graceful stop below for the whole drain.
		dctx, cancel := context.WithDeadline(context.Background(), drainBy)
		if derr := g.quota.Drain(dctx); derr != nil {
			g.logger.Warn("rlqs: drain", slog.String("error", derr.Error()))
		}
		cancel()
	}
	stopped := make(chan struct{})
	go func() {
		gs.GracefulStop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(time.Until(drainBy)):
		gs.Stop()
		<-stopped
	}
	wg.Wait()
	if errors.Is(err, grpc.ErrServerStopped) {
		err = nil
	}
	return err
}

// reloadRLS loads dir again and puts it in force; an invalid directory
// leaves the rules in force, logged and counted as a failed reload.
func (b *Built) reloadRLS(g *grpcListener, dir string) {
	rules, err := rls.LoadDir(dir)
	if err == nil {
		err = rls.CheckReload(dir, g.svc.Rules(), rules)
	}
	if err == nil {
		err = g.svc.Swap(rules)
	}
	if err != nil {
		b.live.metrics.reloadsErr.Add(1)
		g.logger.Error("rls config reload failed; the rules in force stay", slog.String("dir", dir), slog.String("error", err.Error()))
		return
	}
	b.live.metrics.reloadsOK.Add(1)
	if g.quota != nil {
		g.quota.Swap(rules) // a bucket whose rule is gone is abandoned
	}
	if g.live != nil {
		// Rules added or removed are live-limit classes added or removed.
		b.mu.Lock()
		g.live.SetTargets(b.liveTargets(b.live.cfg))
		b.mu.Unlock()
		g.refreshLive()
	}
	g.relabel(nil)
	g.logger.Info("rls config reloaded", slog.String("dir", dir), slog.Any("domains", rules.Domains()))
}

// rlsTargets lists every limited rule × plan tier as a live-limit target whose class
// is the rule's endpoint label ("messaging.message_type_marketing.to_number"), which
// no HTTP class name can be (they hold no '.'). Blocked rules have no limit to change.
func rlsTargets(rules *rls.Rules, cfg *config.Config) []livelimits.Target {
	var out []livelimits.Target
	for _, r := range rules.Limits() {
		if r.Blocked {
			continue
		}
		for _, tier := range cfg.Tiers.Names {
			out = append(out, livelimits.Target{Class: r.Endpoint, Tier: tier, Limit: r.Limit, Cost: 1})
		}
	}
	return out
}

// liveTargets lists the live-limit targets of cfg: its classes and, with
// the gRPC listener on, the descriptor rules in force. Call with b.mu held.
func (b *Built) liveTargets(cfg *config.Config) []livelimits.Target {
	out := targets(cfg)
	if b.grpc != nil {
		out = append(out, rlsTargets(b.grpc.svc.Rules(), cfg)...)
	}
	return out
}

// refreshLive reads the live-limit hashes and puts them in force on the descriptors;
// a store that does not answer is logged, and the periodic refresh reads them later.
func (g *grpcListener) refreshLive() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := g.live.Refresh(ctx); err != nil {
		g.logger.Warn("live limits: read for the descriptor rules failed; the configured limits apply until the store answers",
			slog.String("error", err.Error()))
	}
	g.applyLive()
}

// applyLive puts the live changes of the cache in force on the descriptors.
func (g *grpcListener) applyLive() {
	if g.live == nil {
		return
	}
	if err := g.svc.SetLive(g.live.Overlay().Live()); err != nil {
		g.logger.Error("live limits not applied to the descriptor rules", slog.String("error", err.Error()))
	}
}

// relabel gives the labels the endpoints and limits of the HTTP policy p
// (nil: the one last given) and of the rules in force.
func (g *grpcListener) relabel(p *httplimit.Policy) {
	if g.labels == nil {
		return
	}
	g.labelsMu.Lock()
	defer g.labelsMu.Unlock()
	if p != nil {
		g.policy = p
		// A reload may change the tiers: label descriptors with the new ones.
		g.svc.SetTiers(p.Tiers(), p.DefaultTier())
	}
	tiers, dflt := g.tiers, g.defaultTierName
	var endpoints []string
	if g.policy != nil {
		tiers, dflt = g.policy.Tiers(), g.policy.DefaultTier()
		endpoints = g.policy.Endpoints()
	}
	if len(tiers) == 0 {
		tiers = []string{dflt}
	}
	rules := g.svc.Rules().Limits()
	for _, r := range rules {
		endpoints = append(endpoints, r.Endpoint)
	}
	endpoints = append(endpoints, g.svc.DetailedEndpoints()...)
	endpoints = uniq(endpoints)
	var limits []httplimit.EndpointLimit
	if g.policy != nil {
		limits = g.policy.Limits()
	}
	for _, r := range rules {
		if r.Blocked {
			continue // no quota to show
		}
		for _, t := range tiers {
			lim := r.Limit
			if l, ok := g.svc.LiveLimit(r.Endpoint, t); ok {
				lim = l
			}
			limits = append(limits, httplimit.EndpointLimit{Endpoint: r.Endpoint, PlanTier: t, Limit: lim})
		}
	}
	setLabels(g.labels, g.logger, endpoints, tiers, dflt, limits)
	// setLabels' Reconfigure forgot the HTTP policy's concurrency limits: tell them again, as
	// the policy's own relabel does.
	if ll, ok := g.labels.(leaseLabels); ok && g.policy != nil {
		setLeaseLabels(ll, g.logger, g.policy.LeaseLimits())
	}
}

// setLabels tells labels the endpoints and tiers, then each limit in force.
// Failures are logged: the metrics keep their previous labels.
func setLabels(labels EndpointLabels, logger *slog.Logger, endpoints, tiers []string, dflt string, limits []httplimit.EndpointLimit) {
	if err := labels.Reconfigure(endpoints, tiers, dflt); err != nil {
		logger.Warn("metrics: reconfigure labels", slog.String("error", err.Error()))
		return
	}
	named, ok := labels.(NamedLimitLabels)
	for i := 0; i < len(limits); {
		l := limits[i]
		j := i + 1 // a tier of several limits is listed together (Policy.Limits)
		for j < len(limits) && limits[j].Endpoint == l.Endpoint && limits[j].PlanTier == l.PlanTier {
			j++
		}
		var err error
		if ok {
			nls := make([]collector.NamedLimit, 0, j-i)
			for _, e := range limits[i:j] {
				name := e.Name
				if name == "" { // a descriptor rule's limit, named by its endpoint
					name = e.Endpoint
				}
				nls = append(nls, collector.NamedLimit{Name: name, Limit: e.Limit})
			}
			err = named.SetLimits(l.Endpoint, l.PlanTier, nls)
		} else {
			err = labels.SetLimit(l.Endpoint, l.PlanTier, limits[j-1].Limit)
		}
		if err != nil {
			logger.Warn("metrics: limit in force", slog.String("endpoint", l.Endpoint),
				slog.String("plan_tier", l.PlanTier), slog.String("error", err.Error()))
		}
		i = j
	}
}

// GRPCAddr returns the bound address of the gRPC listener, or "" when it is not open.
func (b *Built) GRPCAddr() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.grpc == nil {
		return ""
	}
	return b.grpc.ln.Addr().String()
}

var rlsInvalidDesc = prometheus.NewDesc("rate_limit_rls_invalid_requests_total",
	"Rate limit service requests that were invalid, by reason: too_many_descriptors, too_many_entries, too_long (a domain or entry key), invalid (answered INVALID_ARGUMENT), or cost_exceeds_limit (a hits_addend above the descriptor's quota, answered OVER_LIMIT).",
	[]string{"reason"}, nil)

// RLSMetrics returns rate_limit_rls_invalid_requests_total, by reason, as a
// prometheus.Collector for the /metrics registry; it collects nothing without
// the gRPC listener. Safe for concurrent use.
func (b *Built) RLSMetrics() prometheus.Collector { return rlsMetrics{b} }

type rlsMetrics struct{ b *Built }

// Describe is part of prometheus.Collector.
func (m rlsMetrics) Describe(ch chan<- *prometheus.Desc) { ch <- rlsInvalidDesc }

// Collect is part of prometheus.Collector.
func (m rlsMetrics) Collect(ch chan<- prometheus.Metric) {
	m.b.mu.Lock()
	g := m.b.grpc
	m.b.mu.Unlock()
	if g == nil {
		return
	}
	for reason, n := range g.svc.InvalidRequests() {
		ch <- prometheus.MustNewConstMetric(rlsInvalidDesc, prometheus.CounterValue, float64(n), reason)
	}
}

// uniq drops repeated strings, keeping the first of each in order.
func uniq(in []string) []string {
	seen := make(map[string]bool, len(in))
	out := in[:0]
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
