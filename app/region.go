package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rl-exporter/rl-exporter/collector"
	"github.com/rl-exporter/rl-exporter/config"
	"github.com/rl-exporter/rl-exporter/httplimit"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/region"
)

// regions is the multi-region part of a Built: the region.Set of store.redis and
// region.peers, and the store of each region mode and options the policies use.
// The region block is read at start; a class's region_mode and hybrid_threshold
// apply on reload, making a store then if need be. Safe for concurrent use.
type regions struct {
	set   *region.Set
	block config.Region           // the block the set was made from
	peers []redis.UniversalClient // the peers' clients; this region's is OpenedStore's

	mu     sync.Mutex
	stores map[regionStoreKey]limiter.Store
	modes  map[limiter.Store]region.Mode // the mode of each store in stores
}

// supports returns an error naming the class, tier and mode when the region mode
// deciding c's tier cannot enforce lim's algorithm (a live change is not validated
// against the tier's mode); nil for a local tier or without regions.
func (r *regions) supports(c httplimit.Class, tier string, lim limiter.Limit) error {
	if r == nil {
		return nil
	}
	st, ok := c.TierStores[tier]
	if !ok {
		return nil
	}
	r.mu.Lock()
	mode := r.modes[st]
	r.mu.Unlock()
	if mode == "" || region.Supports(mode, lim.Algorithm) {
		return nil
	}
	return fmt.Errorf("class %s tier %s: region_mode %s does not support algorithm %s (%s supports %v)", c.Name, tier, mode, lim.Algorithm, mode, region.Algorithms(mode))
}

type regionStoreKey struct {
	mode region.Mode
	opt  region.StoreOptions
}

// setupRegions, with region.name, opens the peers' clients, makes the region.Set
// and readies every region's Redis (warmRegions). An unreachable region does not
// stop serve: strict decisions homed there follow store.fail_policy, and async
// ones go on with its last known counts.
func (b *Built) setupRegions(cfg *config.Config, d Deps, local redis.UniversalClient) error {
	if cfg.Region.Name == "" {
		return nil
	}
	if local == nil {
		return fmt.Errorf("config %s: region: needs store.type redis", cfg.Source)
	}
	r := &regions{block: cfg.Region, stores: map[regionStoreKey]limiter.Store{}, modes: map[limiter.Store]region.Mode{}}
	clients := map[string]redis.UniversalClient{cfg.Region.Name: local}
	for _, name := range slices.Sorted(maps.Keys(cfg.Region.Peers)) {
		client, err := openPeer(cfg, name, d)
		if err != nil {
			_ = r.closeClients()
			return err
		}
		r.peers = append(r.peers, client)
		clients[name] = client
	}
	rc := region.Config{
		Local: cfg.Region.Name, Clients: clients, Store: d.redisStoreConfig(cfg),
		SyncInterval: cfg.Region.SyncInterval, SyncTimeout: cfg.Region.SyncTimeout, MaxClockSkew: cfg.Region.MaxClockSkew,
		Logger: d.Logger,
	}
	if d.Region != nil {
		rc.Observer = d.Region
	}
	set, err := region.New(rc)
	if err != nil {
		_ = r.closeClients()
		return fmt.Errorf("config %s: region: %w", cfg.Source, err)
	}
	r.set = set
	b.regions = r
	warmRegions(set, max(cfg.Region.SyncTimeout, minRegionWarm), d.Logger)
	return nil
}

// minRegionWarm is the least bound on the wait at start for the regions' Redis
// to be readied (region.sync_timeout when longer).
const minRegionWarm = 2 * time.Second

// warmRegions readies every region's Redis (region.Set.Warm) for at most bound.
// A region that does not answer in time is logged; decisions homed there dial
// and load their scripts on first use.
func warmRegions(set *region.Set, bound time.Duration, logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	if err := set.Warm(ctx); err != nil && logger != nil {
		logger.Warn("region: not every region's Redis could be readied before serving; decisions homed there load their scripts on first use",
			slog.String("error", err.Error()), slog.Duration("bound", bound))
	}
}

// openPeer opens the client of the peer region name, instrumented like this region's.
func openPeer(cfg *config.Config, name string, d Deps) (redis.UniversalClient, error) {
	key := "region.peers." + name
	cc, err := cfg.PeerClientConfig(name)
	if err != nil {
		return nil, fmt.Errorf("config %s: %s: %w", cfg.Source, key, err)
	}
	client, err := cc.NewClient()
	if err != nil {
		return nil, fmt.Errorf("config %s: %s: %w", cfg.Source, key, err)
	}
	if err := instrumentStore(client, d.InstrumentRedis); err != nil {
		_ = client.Close()
		return nil, fmt.Errorf("config %s: %s: %w", cfg.Source, key, err)
	}
	return client, nil
}

// Close ships one last round (bounded by region.sync_timeout) and closes the
// peers' clients; call it after the last decision, before this region's client closes.
func (r *regions) Close() error {
	return errors.Join(r.set.Close(), r.closeClients())
}

func (r *regions) closeClients() error {
	var errs []error
	for _, c := range r.peers {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// store returns the store of mode with opt, made once and shared, so that a reload
// keeps the stores (and their counts in flight) of the modes it keeps.
func (r *regions) store(mode region.Mode, opt region.StoreOptions) (limiter.Store, error) {
	switch mode { // the options a mode does not read do not make another store
	case region.ModeAsync:
		opt = region.StoreOptions{}
	case region.ModeStrict:
		opt.HybridThreshold = 0
	}
	k := regionStoreKey{mode, opt}
	r.mu.Lock()
	defer r.mu.Unlock()
	if st, ok := r.stores[k]; ok {
		return st, nil
	}
	st, err := r.set.Store(mode, opt)
	if err != nil {
		return nil, err
	}
	r.stores[k] = st
	r.modes[st] = mode
	return st, nil
}

// setRegionStores gives each class and tier of pc whose region mode is not local
// the store of its mode: cfg's modes and hybrid thresholds, with the tier homes of
// the region block the process started with.
func (b *Built) setRegionStores(cfg *config.Config, pc *httplimit.PolicyConfig) error {
	for i, c := range pc.Classes {
		for _, tier := range cfg.Tiers.Names {
			mode := cfg.RegionMode(c.Name, tier)
			if mode == region.ModeLocal {
				continue
			}
			if b.regions == nil {
				return fmt.Errorf("classes.%s: region_mode %s: this process started without region.name; a region block takes a restart", c.Name, mode)
			}
			opt := cfg.RegionStoreOptions(c.Name, tier)
			opt.Home = b.regions.block.TierHomes[tier]
			st, err := b.regions.store(mode, opt)
			if err != nil {
				return fmt.Errorf("classes.%s tier %s: region_mode %s: %w", c.Name, tier, mode, err)
			}
			if c.TierStores == nil {
				c.TierStores = map[string]limiter.Store{}
			}
			c.TierStores[tier] = st
		}
		pc.Classes[i] = c
	}
	return nil
}

// regionObserver hands the region package's observations to the collector (mode as a string).
type regionObserver struct{ m *collector.Region }

func (o regionObserver) ObserveSync(peer string, lag time.Duration, err error) {
	o.m.ObserveSync(peer, lag, err)
}

func (o regionObserver) ObserveDecision(mode region.Mode, home string) {
	o.m.ObserveDecision(string(mode), home)
}

func (o regionObserver) ObserveRTT(peer string, elapsed time.Duration) {
	o.m.ObserveRTT(peer, elapsed)
}

func (o regionObserver) ObserveRejectedSlots(peer string, n int) {
	o.m.ObserveRejectedSlots(peer, n)
}

var _ region.Observer = regionObserver{}

// newRegionMetrics returns the region metrics of cfg, nil without region.name.
func newRegionMetrics(cfg *config.Config) (*collector.Region, error) {
	if cfg.Region.Name == "" {
		return nil, nil
	}
	var modes []string
	for _, m := range cfg.RegionModes() {
		modes = append(modes, string(m))
	}
	return collector.NewRegion(collector.RegionConfig{
		Peers: slices.Sorted(maps.Keys(cfg.Region.Peers)), Modes: modes, NativeHistograms: cfg.Metrics.NativeHistograms,
	})
}

// logRegions says at start which region this is and how its classes are shared.
func logRegions(logger *slog.Logger, cfg *config.Config) {
	if cfg.Region.Name == "" || logger == nil {
		return
	}
	var modes []string
	for _, m := range cfg.RegionModes() {
		modes = append(modes, string(m))
	}
	logger.Info("multi-region limits", slog.String("region", cfg.Region.Name),
		slog.Any("regions", cfg.Regions()), slog.Any("modes", modes))
}
