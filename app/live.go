package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/rl-exporter/rl-exporter/admin"
	"github.com/rl-exporter/rl-exporter/config"
	"github.com/rl-exporter/rl-exporter/decision"
	"github.com/rl-exporter/rl-exporter/httplimit"
	"github.com/rl-exporter/rl-exporter/livelimits"
)

// ConfigMetrics counts invalid live-limit values (rate_limit_config_errors_total)
// and reloads of the config file and of rls.config_dir by result
// (rate_limit_config_reloads_total). It is a prometheus.Collector for the
// /metrics registry, safe for concurrent use.
type ConfigMetrics struct {
	errors     atomic.Uint64
	reloadsOK  atomic.Uint64
	reloadsErr atomic.Uint64
	errorsDesc *prometheus.Desc
	reloadDesc *prometheus.Desc
}

// NewConfigMetrics returns zeroed counters.
func NewConfigMetrics() *ConfigMetrics {
	return &ConfigMetrics{
		errorsDesc: prometheus.NewDesc("rate_limit_config_errors_total",
			"Live-limit values in the store that failed validation and were ignored (the last good value kept applying).", nil, nil),
		reloadDesc: prometheus.NewDesc("rate_limit_config_reloads_total",
			"Reloads of the config file and of rls.config_dir, by result: success (applied) or error (rejected; the previous config kept serving).", []string{"result"}, nil),
	}
}

// Describe is part of prometheus.Collector.
func (m *ConfigMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.errorsDesc
	ch <- m.reloadDesc
}

// Collect is part of prometheus.Collector.
func (m *ConfigMetrics) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(m.errorsDesc, prometheus.CounterValue, float64(m.errors.Load()))
	ch <- prometheus.MustNewConstMetric(m.reloadDesc, prometheus.CounterValue, float64(m.reloadsOK.Load()), "success")
	ch <- prometheus.MustNewConstMetric(m.reloadDesc, prometheus.CounterValue, float64(m.reloadsErr.Load()), "error")
}

// Errors returns rate_limit_config_errors_total.
func (m *ConfigMetrics) Errors() uint64 { return m.errors.Load() }

// Reloads returns rate_limit_config_reloads_total by result.
func (m *ConfigMetrics) Reloads() (success, failed uint64) {
	return m.reloadsOK.Load(), m.reloadsErr.Load()
}

// liveState is what Built keeps for live limits and reloads.
type liveState struct {
	cfg     *config.Config
	pc      httplimit.PolicyConfig // the file's policy, without live changes
	cache   *livelimits.Cache      // nil when live limits are off
	metrics *ConfigMetrics
	sources *config.Sources
	logger  *slog.Logger
	reloads <-chan struct{}   // Deps.Reloads
	strict  bool              // Deps.StrictSecrets
	guard   *admin.TokenGuard // nil when no admin token was configured at start
	asked   atomic.Bool       // the reload under way was asked for (SIGHUP), not a file change
}

// ConfigMetrics returns the configuration counters, for the /metrics registry.
func (b *Built) ConfigMetrics() *ConfigMetrics { return b.live.metrics }

// LiveLimits returns the live-limit cache, nil when live limits are off.
func (b *Built) LiveLimits() *livelimits.Cache { return b.live.cache }

// setupLive prepares the live-limit cache (on Redis with the Redis store, else in
// process) and reads it once, so that a change made before start applies from the
// first request; a Redis that does not answer is logged and read again later.
func (b *Built) setupLive(cfg *config.Config, d Deps, client redis.UniversalClient) error {
	b.live.cfg = cfg
	b.live.metrics = NewConfigMetrics()
	b.live.sources = d.Sources
	b.live.reloads, b.live.strict = d.Reloads, d.StrictSecrets
	b.live.logger = d.Logger
	if b.live.logger == nil {
		b.live.logger = slog.New(slog.DiscardHandler)
	}
	if !cfg.Live.Enabled {
		return nil
	}
	prefix := cfg.Store.Redis.Prefix
	if prefix == "" {
		prefix = livelimits.DefaultPrefix
	}
	var backend livelimits.Backend = &livelimits.Memory{}
	if client != nil {
		backend = &livelimits.Redis{Client: client, Channel: livelimits.Channel(prefix)}
	}
	cache, err := livelimits.New(livelimits.Config{
		Backend: backend, Prefix: prefix, Targets: targets(cfg), Validate: config.ValidateLimit,
		RefreshInterval: cfg.Live.RefreshInterval, Logger: b.live.logger,
		OnChange: b.applyLive,
		OnError:  func(string, error) { b.live.metrics.errors.Add(1) },
	})
	if err != nil {
		return err
	}
	b.live.cache = cache
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := cache.Refresh(ctx); err != nil {
		b.live.logger.Warn("live limits: first read failed; the configured limits apply until the store answers", slog.String("error", err.Error()))
	}
	return nil
}

// targets lists every class × tier of cfg with its configured limit, and every rate limit of a
// tier of several by its name. A concurrency limit is left out: no live change sets requests in
// flight.
func targets(cfg *config.Config) []livelimits.Target {
	var out []livelimits.Target
	for _, name := range cfg.ClassNames() {
		cl := cfg.Classes[name]
		for _, tier := range cfg.Tiers.Names {
			l := cfg.TierLimit(name, tier)
			if l.List == nil {
				if !l.IsConcurrency() {
					out = append(out, livelimits.Target{Class: name, Tier: tier, Limit: l.Limiter(), Cost: cl.Cost})
				}
				continue
			}
			limits, _ := cfg.NamedLimits(name, tier)
			for _, nl := range limits {
				if nl.IsConcurrency() {
					continue
				}
				cost := int64(1)
				if httplimit.Unit(nl.Unit) == httplimit.UnitCost {
					cost = cl.Cost
				}
				out = append(out, livelimits.Target{Class: name, Tier: tier, Name: nl.Name, Limit: nl.Limiter(), Cost: cost})
			}
		}
	}
	return out
}

// adminHandlers adds the admin API to the caller's handlers when admin tokens are
// configured, and then every handler, /debug/pprof/ included, needs a token.
// Without tokens the caller's handlers answer 403 (admin.NeedsTokens): the
// top-limited keys name clients.
func (b *Built) adminHandlers(cfg *config.Config, extra map[string]http.Handler, mw *httplimit.Middleware) (map[string]http.Handler, error) {
	out := map[string]http.Handler{}
	toks, err := cfg.AdminTokens()
	if err != nil {
		return nil, fmt.Errorf("config %s: admin: %w", cfg.Source, err)
	}
	if len(toks) == 0 {
		for p := range extra {
			out[p] = admin.NeedsTokens()
		}
		out[admin.UsagePath] = admin.NeedsTokens()
		return out, nil
	}
	list := adminTokens(toks)
	b.authFailures = &admin.AuthFailures{Logger: b.live.logger}
	guard, err := admin.NewTokenGuardWith(admin.TokenGuardConfig{Tokens: list, Failures: b.authFailures})
	if err != nil {
		return nil, err
	}
	b.live.guard = guard
	for p, h := range extra {
		out[p] = guard.ReadOnly(h)
	}
	for p, h := range admin.ProfilingHandlers() {
		out[p] = guard.ReadOnly(h)
	}
	out[admin.UsagePath] = guard.ReadOnly(mw.UsageHandler())
	if b.live.cache == nil {
		b.live.logger.Warn("admin API off: live limits are disabled (live.enabled: false)")
		return out, nil
	}
	api, err := admin.New(admin.Config{Guard: guard, Cache: b.live.cache, Logger: b.live.logger, Keys: mw})
	if err != nil {
		return nil, err
	}
	for p, h := range api.Handlers() {
		out[p] = h
	}
	return out, nil
}

// adminTokens are the config's admin tokens as the admin API takes them.
func adminTokens(toks []config.AdminToken) []admin.Token {
	list := make([]admin.Token, 0, len(toks))
	for _, t := range toks {
		list = append(list, admin.Token{Name: t.Name, ReadWrite: t.Role == config.RoleReadWrite, Secret: t.Token.Reveal()})
	}
	return list
}

// checkSecrets logs a warning for each secret file of cfg that other users
// may read or, when strict, refuses cfg naming them all.
func checkSecrets(cfg *config.Config, strict bool, logger *slog.Logger) error {
	loose := cfg.LooseSecretFiles()
	if strict {
		return errors.Join(loose...)
	}
	if logger != nil {
		for _, err := range loose {
			logger.Warn("secret file readable beyond its owner", slog.String("error", err.Error()))
		}
	}
	return nil
}

// withLive returns pc with the live changes of the cache applied, and whether there was one.
func (b *Built) withLive(pc httplimit.PolicyConfig) (httplimit.PolicyConfig, bool) {
	if b.live.cache == nil {
		return pc, false
	}
	ov := b.live.cache.Overlay()
	classes := make([]httplimit.Class, len(pc.Classes))
	live := false
	for i, c := range pc.Classes {
		c.Live = nil
		for at, ap := range ov[c.Name] {
			tier, _, _ := strings.Cut(at, ":") // at is a tier, or a tier and one of its limits' names
			if err := b.regions.supports(c, tier, ap.Limit); err != nil {
				b.live.logger.Error("live limit left out", slog.String("source", ap.Source), slog.String("error", err.Error()))
				continue
			}
			if c.Live == nil {
				c.Live = map[string]decision.LiveLimit{}
			}
			c.Live[at] = ap.Live()
			live = true
		}
		classes[i] = c
	}
	pc.Classes = classes
	return pc, live
}

// newPolicy compiles a policy: every compilation of this package goes through it, so that a test
// can count them.
var newPolicy = httplimit.NewPolicy

// compile builds the policy of pc with the live changes; should the policy refuse
// them, they are logged and left out rather than the file's change. base, when not
// nil, is pc compiled already, without them: it is the policy when there are none.
func (b *Built) compile(pc httplimit.PolicyConfig, base *httplimit.Policy) (*httplimit.Policy, error) {
	lpc, live := b.withLive(pc)
	if !live && base != nil {
		return base, nil
	}
	p, err := newPolicy(lpc)
	if err == nil || !live {
		return p, err
	}
	b.live.logger.Error("live limits left out: the policy refused them", slog.String("error", err.Error()))
	if base != nil {
		return base, nil
	}
	return newPolicy(pc)
}

// applyLive puts a new overlay of live changes in force.
func (b *Built) applyLive(livelimits.Overlay) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.Server == nil {
		return // still building: the policy is compiled with the overlay
	}
	p, err := b.compile(b.live.pc, nil)
	if err != nil {
		b.live.logger.Error("live limits not applied", slog.String("error", err.Error()))
		return
	}
	b.Middleware().Swap(p)
	b.live.logger.Info("live limits applied")
}

// reload applies cfg's policy with the live changes, and its admin tokens
// (admin.tokens_file read again). A cfg that config.CheckReload refuses, whose
// admin tokens do not load, or, with StrictSecrets, whose secret files others
// may read, changes nothing.
func (b *Built) reload(cfg *config.Config) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if old := b.live.cfg; old != nil {
		if err := config.CheckReload(old, cfg); err != nil {
			return err
		}
	}
	if err := checkSecrets(cfg, b.live.strict, b.live.logger); err != nil {
		return err
	}
	toks, err := cfg.AdminTokens()
	if err != nil {
		return fmt.Errorf("config %s: admin: %w", cfg.Source, err)
	}
	pc, err := b.policyConfig(cfg)
	if err != nil {
		return fmt.Errorf("config %s: %w", cfg.Source, err)
	}
	var base *httplimit.Policy
	if b.live.cache != nil {
		// Compiled before the targets change, so that a policy that refuses pc changes none of
		// them; it is the policy itself unless live changes apply.
		if base, err = newPolicy(pc); err != nil {
			return fmt.Errorf("config %s: %w", cfg.Source, err)
		}
		b.live.cache.SetTargets(b.liveTargets(cfg))
	}
	p, err := b.compile(pc, base)
	if err != nil {
		return fmt.Errorf("config %s: %w", cfg.Source, err)
	}
	b.Middleware().Swap(p)
	if b.priorities.Load() != nil {
		b.priorities.Store(cfg)
	}
	var restart []string
	if old := b.live.cfg; old != nil {
		restart = config.RestartRequired(old, cfg)
	}
	switch {
	case b.live.guard != nil:
		// Checked above: every token has a name and a secret.
		_ = b.live.guard.SetTokens(adminTokens(toks))
		if len(toks) == 0 {
			b.live.logger.Warn("admin tokens: none left; every admin request is refused until one is configured")
		}
	case len(toks) > 0:
		restart = append(restart, "admin") // the admin API is served only when a token was configured at start
	}
	if len(restart) > 0 {
		b.live.logger.Warn("config reloaded; these changes need a restart to apply", slog.Any("keys", restart))
	}
	b.live.cfg, b.live.pc = cfg, pc
	b.shares.use(pc)
	return nil
}

// reloadFromSources loads the config again (file, environment, flags) and applies
// it, counting and logging the result with its trigger (file change or SIGHUP).
func (b *Built) reloadFromSources() {
	trigger := "file change"
	if b.live.asked.Swap(false) {
		trigger = "SIGHUP"
	}
	file := cmp.Or(b.live.sources.File, config.BuiltIn)
	cfg, err := b.live.sources.Load()
	if err != nil {
		b.live.metrics.reloadsErr.Add(1)
	} else {
		err = b.Reload(cfg)
	}
	if err != nil {
		b.live.logger.Error("config reload rejected; the previous config keeps serving",
			slog.String("file", file), slog.String("trigger", trigger), slog.String("error", err.Error()))
		return
	}
	b.live.logger.Info("config reloaded", slog.String("file", file), slog.String("trigger", trigger))
}

// followReloads reloads the config and rls.config_dir at each receive on
// Deps.Reloads until ctx is done: through the file's watch when it runs, so that
// its content check does not apply the reload again, else at once.
func (b *Built) followReloads(ctx context.Context, watch chan<- struct{}) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.live.reloads:
		}
		b.live.asked.Store(true)
		if watch != nil {
			select {
			case watch <- struct{}{}:
			default: // one is pending: it reads the file afresh too
			}
		} else {
			b.reloadFromSources()
		}
		b.mu.Lock()
		g := b.grpc
		b.mu.Unlock()
		if g != nil {
			select {
			case g.reloads <- struct{}{}:
			default:
			}
		}
	}
}

// defaultMetricsHandler serves the Go and process collectors and the config counters.
func defaultMetricsHandler(m *ConfigMetrics) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), m)
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
}
