package config

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/rl-exporter/rl-exporter/httplimit"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
	"github.com/rl-exporter/rl-exporter/region"
)

// Region configures multi-region limits (docs/multi-region.md): the name of
// this process's region, its peers (the other regions' Redis, reached as
// store.redis reaches this region's own) and how counts are shipped to
// them. Without Name every class is local: each region limits on its own
// Redis. The whole block takes effect at start; a reload that changes it
// is logged as needing a restart.
type Region struct {
	// Name is this region's name ("us-east-1"); empty turns multi-region
	// off. Letters, digits, '_' and '-' only.
	Name string `koanf:"name"`
	// SyncInterval is how often this region ships its new counts to each
	// peer (async and hybrid modes). Default 100ms.
	SyncInterval time.Duration `koanf:"sync_interval"`
	// SyncTimeout bounds one shipping round to one peer. Default 1s.
	SyncTimeout time.Duration `koanf:"sync_timeout"`
	// MaxClockSkew is how far ahead of the receiving Redis's clock a
	// shipped count's window may start: further, the merge ignores it
	// (counted in rate_limit_region_rejected_slots_total) instead of
	// letting it hide its region's real counts until then. > 0; default 5s.
	MaxClockSkew time.Duration `koanf:"max_clock_skew"`
	// Peers are the other regions' Redis by region name, in the forms of
	// store.redis (url, cluster_addrs, sentinel_addrs, tls, password_file
	// ...). The key prefix and batching are store.redis's for every
	// region; the connection settings a peer leaves unset (pool_size,
	// dial_timeout, dial_attempts, cluster.*) are store.redis's too.
	Peers map[string]Redis `koanf:"peers"`
	// TierHomes pins the keys of a plan tier to a home region for the
	// strict and hybrid modes, instead of a hash of each key over the
	// region names.
	TierHomes map[string]string `koanf:"tier_homes"`
}

// DefaultHybridThreshold is the share of a limit below which a hybrid key
// is decided asynchronously, when classes.<c>.hybrid_threshold is not set.
const DefaultHybridThreshold = region.DefaultHybridThreshold

// Regions returns every region's name, this one's included, sorted; nil
// without region.name.
func (c *Config) Regions() []string {
	if c.Region.Name == "" {
		return nil
	}
	out := append([]string{c.Region.Name}, slices.Sorted(maps.Keys(c.Region.Peers))...)
	sort.Strings(out)
	return out
}

// RegionMode is the region mode of class's limit for tier: the tier's
// region_mode, else the class's, else local. A tier without a limit of its
// own uses the default tier's limit, and so its mode. It assumes a
// validated Config (an unknown mode reads as local).
func (c *Config) RegionMode(class, tier string) region.Mode {
	cl := c.Classes[class]
	l, ok := cl.Limits[tier]
	if !ok {
		l = cl.Limits[c.Tiers.Default]
	}
	s := l.regionMode()
	if s == "" {
		s = cl.RegionMode
	}
	m, err := region.ParseMode(s)
	if err != nil {
		return region.ModeLocal
	}
	return m
}

// RegionStoreOptions are the options of the store deciding class's limit
// for tier: the class's hybrid threshold and the tier's pinned home.
func (c *Config) RegionStoreOptions(class, tier string) region.StoreOptions {
	opt := region.StoreOptions{HybridThreshold: DefaultHybridThreshold, Home: c.Region.TierHomes[tier]}
	if t := c.Classes[class].HybridThreshold; t != nil {
		opt.HybridThreshold = *t
	}
	return opt
}

// RegionModes lists the region modes other than local that the classes
// use, sorted.
func (c *Config) RegionModes() []region.Mode {
	seen := map[region.Mode]bool{}
	for name := range c.Classes {
		for _, tier := range c.Tiers.Names {
			if m := c.RegionMode(name, tier); m != region.ModeLocal {
				seen[m] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// PeerClientConfig returns how to reach the Redis of the peer region
// named peer, reading its password file.
func (c *Config) PeerClientConfig(peer string) (redisstore.ClientConfig, error) {
	r, ok := c.Region.Peers[peer]
	if !ok {
		return redisstore.ClientConfig{}, fmt.Errorf("region.peers: no peer %q", peer)
	}
	return c.redisClientConfig(r)
}

// fillRegion gives each peer the connection settings of store.redis it
// leaves unset.
func (c *Config) fillRegion() {
	own := c.Store.Redis
	for name, p := range c.Region.Peers {
		if p.PoolSize == 0 {
			p.PoolSize = own.PoolSize
		}
		if p.DialTimeout == 0 {
			p.DialTimeout = own.DialTimeout
		}
		if p.DialAttempts == 0 {
			p.DialAttempts = own.DialAttempts
		}
		if p.Cluster.RefreshMinInterval == 0 {
			p.Cluster.RefreshMinInterval = own.Cluster.RefreshMinInterval
		}
		if p.Cluster.ReloadInterval == 0 {
			p.Cluster.ReloadInterval = own.Cluster.ReloadInterval
		}
		if p.Cluster.MaxRedirects == 0 {
			p.Cluster.MaxRedirects = own.Cluster.MaxRedirects
		}
		c.Region.Peers[name] = p
	}
}

// validateRegion checks the region block and, for each class and tier,
// its region mode: known, served by a region block with at least one peer
// and a Redis store, and supporting the limit's algorithm.
func (c *Config) validateRegion(e *errs) {
	r := c.Region
	on := r.Name != ""
	if on && !httplimit.ValidName(r.Name) {
		e.add("region.name", "%q: letters, digits, '_' and '-' only", r.Name)
	}
	if r.SyncInterval <= 0 {
		e.add("region.sync_interval", "must be > 0, got %s", r.SyncInterval)
	}
	if r.SyncTimeout <= 0 {
		e.add("region.sync_timeout", "must be > 0, got %s", r.SyncTimeout)
	}
	if r.MaxClockSkew <= 0 {
		e.add("region.max_clock_skew", "must be > 0, got %s", r.MaxClockSkew)
	}
	for _, name := range slices.Sorted(maps.Keys(r.Peers)) {
		c.validatePeer(e, name, r.Peers[name])
	}
	known := map[string]bool{}
	for _, n := range c.Regions() {
		known[n] = true
	}
	tiers := map[string]bool{}
	for _, t := range c.Tiers.Names {
		tiers[t] = true
	}
	for _, tier := range slices.Sorted(maps.Keys(r.TierHomes)) {
		home, key := r.TierHomes[tier], "region.tier_homes."+tier
		if !tiers[tier] {
			e.addHint(key, suggest(tier, c.Tiers.Names), "unknown tier (tiers.names is %v)", c.Tiers.Names)
		}
		if !known[home] {
			e.add(key, "%q is not a region (the regions are region.name and the names of region.peers: %v)", home, c.Regions())
		}
	}
	users := c.validateRegionModes(e)
	if len(users) == 0 {
		if on && c.Store.Type != "redis" {
			e.add("store.type", "%q: region.name turns multi-region on, which decides on each region's Redis, so store.type must be redis", c.Store.Type)
		}
		return
	}
	need := fmt.Sprintf("needed by %s", strings.Join(users, ", "))
	if !on {
		e.add("region.name", "required: %s", need)
	}
	if len(r.Peers) == 0 {
		e.add("region.peers", "at least one peer region is required: %s", need)
	}
	if c.Store.Type != "redis" {
		e.add("store.type", "%q: region modes other than local decide on each region's Redis, so store.type must be redis: %s", c.Store.Type, need)
	}
}

// validatePeer checks one peer region's name and Redis.
func (c *Config) validatePeer(e *errs, name string, p Redis) {
	key := "region.peers." + name
	if !httplimit.ValidName(name) {
		e.add(key, "region name: letters, digits, '_' and '-' only")
	}
	if name == c.Region.Name {
		e.add(key, "is region.name, this region: list the other regions only")
	}
	if p.Prefix != "" {
		e.add(key+".prefix", "every region uses store.redis.prefix; remove it here")
	}
	if p.Batch != (RedisBatch{}) {
		e.add(key+".batch", "every region uses store.redis.batch; remove it here")
	}
	if p.Durability != "" || p.DurabilityTimeout != 0 {
		e.add(key+".durability", "every region uses store.redis.durability and durability_timeout; remove them here")
	}
	if _, err := c.redisClientConfig(p); err != nil {
		e.addField(key, err)
	}
}

// validateRegionModes checks every class's and tier's region_mode and
// hybrid_threshold, and returns the classes (and tiers) using a mode other
// than local, as "classes.<c>[.limits.<t>] (<mode>)".
func (c *Config) validateRegionModes(e *errs) []string {
	var users []string
	for _, name := range c.ClassNames() {
		cl := c.Classes[name]
		key := "classes." + name
		classMode, err := region.ParseMode(cl.RegionMode)
		if err != nil {
			e.add(key+".region_mode", "%v", err)
		} else if classMode != region.ModeLocal {
			users = append(users, fmt.Sprintf("%s (%s)", key, classMode))
		}
		hybrid := classMode == region.ModeHybrid
		for _, tier := range slices.Sorted(maps.Keys(cl.Limits)) {
			l, lk := cl.Limits[tier], key+".limits."+tier
			if l.List != nil {
				validateListRegion(e, lk, l, classMode)
				continue
			}
			m := classMode
			if l.RegionMode != "" {
				tm, err := region.ParseMode(l.RegionMode)
				if err != nil {
					e.add(lk+".region_mode", "%v", err)
					continue
				}
				m = tm
				if m != region.ModeLocal && m != classMode {
					users = append(users, fmt.Sprintf("%s (%s)", lk, m))
				}
			}
			hybrid = hybrid || m == region.ModeHybrid
			alg := limiter.Algorithm(l.Algorithm)
			if l.IsConcurrency() && m != region.ModeLocal {
				e.add(lk, "class %s tier %s: region_mode %s does not support algorithm concurrency, whose leases one store holds for the fleet; use region_mode local", name, tier, m)
			}
			if _, err := limiter.ParseAlgorithm(l.Algorithm); err == nil && !region.Supports(m, alg) {
				e.add(lk, "class %s tier %s: region_mode %s does not support algorithm %s; %s supports %s",
					name, tier, m, alg, m, algorithmList(region.Algorithms(m)))
			}
		}
		if t := cl.HybridThreshold; t != nil {
			if !(*t > 0 && *t < 1) { // NaN too
				e.add(key+".hybrid_threshold", "must be in (0, 1), got %g", *t)
			} else if !hybrid {
				e.add(key+".hybrid_threshold", "applies to region_mode hybrid only, and neither the class nor any of its tiers is hybrid")
			}
		}
	}
	return users
}

// algorithmList is "a, b or c".
func algorithmList(as []limiter.Algorithm) string {
	s := make([]string, len(as))
	for i, a := range as {
		s[i] = string(a)
	}
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}
