package livelimits

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"sort"
	"sync"
	"time"

	"github.com/rl-exporter/rl-exporter/decision"
	"github.com/rl-exporter/rl-exporter/limiter"
)

// DefaultPrefix is the first component of the keys and of the channel.
const DefaultPrefix = "rl"

// DefaultRefreshInterval is Config.RefreshInterval's default: a missed
// notification is caught up within it.
const DefaultRefreshInterval = 10 * time.Second

// TierKey is the hash of a tier's live change: "<prefix>:config:<tier>".
func TierKey(prefix, tier string) string { return prefix + ":config:" + tier }

// ClassKey is the hash of one class and tier: "<prefix>:config:<class>:<tier>".
func ClassKey(prefix, class, tier string) string { return prefix + ":config:" + class + ":" + tier }

// LimitKey is the hash of one of the several limits of a class's tier, by its name:
// "<prefix>:config:<class>:<tier>:<name>". No tier-wide hash reaches such a limit: names are
// the class's own.
func LimitKey(prefix, class, tier, name string) string {
	return ClassKey(prefix, class, tier) + ":" + name
}

// Channel is the pub/sub channel of notifications: "<prefix>:config".
func Channel(prefix string) string { return prefix + ":config" }

// Target is one class × tier that live changes can apply to, with its
// configured limit and request cost.
type Target struct {
	Class, Tier string
	// Name is the limit's name when the tier has several (LimitKey); "" for a tier under one.
	Name string
	// Limit is the configured limit (the file's).
	Limit limiter.Limit
	// Cost is the class's cost per request; every limit must admit it.
	Cost int64
}

// Applied is a live change in force for one class × tier.
type Applied struct {
	// Limit is the configured limit with the change's fields applied.
	Limit limiter.Limit
	// Source is the key of the hash it comes from.
	Source string
	// RolloutPercent and Shadow are the change's.
	RolloutPercent int
	Shadow         bool
	// ExpiresAt is the change's expiry, zero when none.
	ExpiresAt time.Time
}

// Live is the change as the decision model applies it.
func (a Applied) Live() decision.LiveLimit {
	return decision.LiveLimit{Limit: a.Limit, RolloutPercent: a.RolloutPercent, Shadow: a.Shadow, Source: a.Source}
}

// Overlay is the live changes in force, by class then target (Target.At: the tier, or
// "<tier>:<name>" for one of a tier's several limits).
type Overlay map[string]map[string]Applied

// At is where t's change sits in an Overlay's class: its tier, or "<tier>:<name>" for one of a
// tier's several limits (as httplimit.LiveAt).
func (t Target) At() string {
	if t.Name == "" {
		return t.Tier
	}
	return t.Tier + ":" + t.Name
}

// key is the hash of t's own change.
func (t Target) key(prefix string) string {
	if t.Name == "" {
		return ClassKey(prefix, t.Class, t.Tier)
	}
	return LimitKey(prefix, t.Class, t.Tier, t.Name)
}

// Live is every change of o as the decision model applies it, by class
// (or descriptor rule) then tier.
func (o Overlay) Live() map[string]map[string]decision.LiveLimit {
	out := make(map[string]map[string]decision.LiveLimit, len(o))
	for class, byTier := range o {
		out[class] = make(map[string]decision.LiveLimit, len(byTier))
		for tier, a := range byTier {
			out[class][tier] = a.Live()
		}
	}
	return out
}

// Config configures a Cache. Backend and Targets are required.
type Config struct {
	// Backend holds the changes.
	Backend Backend
	// Prefix of the keys. Default DefaultPrefix.
	Prefix string
	// Targets are every class × tier (SetTargets replaces them on a reload).
	Targets []Target
	// Validate checks a limit exactly as the config file's limits are
	// checked. Default: limiter.Limit.Validate and CheckCost.
	Validate func(l limiter.Limit, cost int64) error
	// RefreshInterval is the period of the full re-read. Default DefaultRefreshInterval.
	RefreshInterval time.Duration
	// OnChange is called with the new overlay each time it changes
	// (a change arrived, expired, or was removed), one call at a time.
	OnChange func(Overlay)
	// OnError is called for each hash that fails validation, once per
	// distinct content (the rate_limit_config_errors_total counter).
	OnError func(key string, err error)
	// Logger; default discard.
	Logger *slog.Logger
	// Now is the clock of expiries; default time.Now.
	Now func() time.Time
}

// Entry is what the Cache knows of one hash, for the admin API.
type Entry struct {
	// Key is the hash's key; Class is empty for a tier's hash, Name for any but one of a
	// tier's several limits'.
	Key, Class, Tier, Name string
	// Change is the last good value (nil when none).
	Change *Change
	// Error is why the current content of the hash is ignored ("" when it is not).
	Error string
}

// Cache keeps the live changes in memory and keeps them current. Overlay
// is safe for concurrent use; OnChange calls are serialised.
type Cache struct {
	cfg Config

	mu       sync.Mutex
	targets  []Target
	keys     map[string]keyInfo // every key that can hold a change
	good     map[string]Change  // key → last good change
	seen     map[string]string  // key → canonical content last validated
	errs     map[string]string  // key → current error
	overlay  Overlay
	timer    *time.Timer
	changeMu sync.Mutex // serialises OnChange
	// refreshMu serialises Refresh from its read to its notice, so that a read taken before a
	// write is never applied, or announced, after a read taken after it.
	refreshMu sync.Mutex
}

type keyInfo struct{ class, tier, name string }

// New returns a Cache; Run starts keeping it current.
func New(cfg Config) (*Cache, error) {
	if cfg.Backend == nil {
		return nil, fmt.Errorf("live limits: Backend is required")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	if cfg.Validate == nil {
		cfg.Validate = func(l limiter.Limit, cost int64) error {
			if err := l.Validate(); err != nil {
				return err
			}
			return l.CheckCost(max(cost, 1))
		}
	}
	if cfg.RefreshInterval <= 0 {
		cfg.RefreshInterval = DefaultRefreshInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	c := &Cache{cfg: cfg, good: map[string]Change{}, seen: map[string]string{}, errs: map[string]string{}, overlay: Overlay{}}
	c.setTargetsLocked(cfg.Targets)
	return c, nil
}

// Prefix is the key prefix.
func (c *Cache) Prefix() string { return c.cfg.Prefix }

// Backend is where the changes are kept.
func (c *Cache) Backend() Backend { return c.cfg.Backend }

func (c *Cache) setTargetsLocked(ts []Target) {
	c.targets = append([]Target(nil), ts...)
	c.keys = map[string]keyInfo{}
	for _, t := range ts {
		if t.Name == "" {
			c.keys[TierKey(c.cfg.Prefix, t.Tier)] = keyInfo{tier: t.Tier}
		}
		c.keys[t.key(c.cfg.Prefix)] = keyInfo{class: t.Class, tier: t.Tier, name: t.Name}
	}
}

// Keys lists every key that can hold a change, sorted.
func (c *Cache) Keys() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.keys))
	for k := range c.keys {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Targets returns the class × tier targets.
func (c *Cache) Targets() []Target {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Target(nil), c.targets...)
}

// SetTargets replaces the targets (after a reload of the config file),
// re-validates every change against the new configured limits and
// recomputes the overlay. It does not call OnChange: the caller applies
// Overlay() with its new policy.
func (c *Cache) SetTargets(ts []Target) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setTargetsLocked(ts)
	// Re-validate at the next read, and drop the good values that the new
	// configured limits make invalid (or whose class or tier is gone).
	c.seen = map[string]string{}
	for k, g := range c.good {
		if err := c.checkLocked(k, g); err != nil {
			c.cfg.Logger.Error("live limit dropped: invalid with the reloaded config", slog.String("key", k), slog.String("error", err.Error()))
			if c.cfg.OnError != nil {
				c.cfg.OnError(k, err)
			}
			delete(c.good, k)
			c.errs[k] = err.Error()
		}
	}
	for k := range c.errs {
		if _, ok := c.keys[k]; !ok {
			delete(c.errs, k)
		}
	}
	c.recomputeLocked()
}

// Overlay returns the changes in force. The result must not be modified.
func (c *Cache) Overlay() Overlay {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.overlay
}

// Entries lists what is known of every key that holds or held a change.
func (c *Cache) Entries() []Entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Entry
	for k, info := range c.keys {
		g, ok := c.good[k]
		e, bad := c.errs[k]
		if !ok && !bad {
			continue
		}
		en := Entry{Key: k, Class: info.class, Tier: info.tier, Name: info.name, Error: e}
		if ok {
			g := g
			en.Change = &g
		}
		out = append(out, en)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// Check validates a change for key as a hash read from the store would be:
// its limit, applied to every configured limit it covers, must pass the
// file's validation. The error names the field and the class and tier.
func (c *Cache) Check(key string, ch Change) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.checkLocked(key, ch)
}

func (c *Cache) checkLocked(key string, ch Change) error {
	info, ok := c.keys[key]
	if !ok {
		return fmt.Errorf("%s: no such class and tier", key)
	}
	for _, t := range c.targets {
		if t.Tier != info.tier || t.Name != info.name || (info.class != "" && t.Class != info.class) {
			continue
		}
		if err := c.cfg.Validate(ch.Apply(t.Limit), t.Cost); err != nil {
			if t.Name != "" {
				return fmt.Errorf("class %s tier %s limit %s: %w", t.Class, t.Tier, t.Name, err)
			}
			return fmt.Errorf("class %s tier %s: %w", t.Class, t.Tier, err)
		}
	}
	return nil
}

// Refresh reads the given keys (every key when none is given) from the
// backend and applies what changed. On a read error nothing changes.
func (c *Cache) Refresh(ctx context.Context, keys ...string) error {
	c.refreshMu.Lock()
	defer c.refreshMu.Unlock()
	if len(keys) == 0 {
		keys = c.Keys()
	}
	hashes, err := c.cfg.Backend.Read(ctx, keys)
	if err != nil {
		return err
	}
	c.mu.Lock()
	for _, k := range keys {
		c.updateLocked(k, hashes[k])
	}
	changed := c.recomputeLocked()
	ov := c.overlay
	c.mu.Unlock()
	if changed {
		c.notify(ov)
	}
	return nil
}

// updateLocked takes in the current content of one hash.
func (c *Cache) updateLocked(key string, fields map[string]string) {
	if _, ok := c.keys[key]; !ok {
		return
	}
	if len(fields) == 0 {
		delete(c.good, key)
		delete(c.errs, key)
		delete(c.seen, key)
		return
	}
	can := canonical(fields)
	if c.seen[key] == can {
		return
	}
	c.seen[key] = can
	ch, err := ParseFields(fields)
	if err == nil {
		err = c.checkLocked(key, ch)
	}
	if err != nil {
		c.errs[key] = err.Error()
		_, kept := c.good[key]
		c.cfg.Logger.Error("live limit ignored: invalid value in the store", slog.String("key", key),
			slog.String("error", err.Error()), slog.Bool("last_good_value_kept", kept))
		if c.cfg.OnError != nil {
			c.cfg.OnError(key, err)
		}
		return
	}
	delete(c.errs, key)
	c.good[key] = ch
	c.cfg.Logger.Info("live limit read", slog.String("key", key), slog.Any("fields", fields))
}

// recomputeLocked rebuilds the overlay and re-arms the expiry timer; it
// reports whether the overlay changed.
func (c *Cache) recomputeLocked() bool {
	now := c.cfg.Now()
	ov := c.computeLocked(now)
	changed := !reflect.DeepEqual(ov, c.overlay)
	c.overlay = ov
	var next time.Time
	for _, g := range c.good {
		if !g.ExpiresAt.IsZero() && g.ExpiresAt.After(now) && (next.IsZero() || g.ExpiresAt.Before(next)) {
			next = g.ExpiresAt
		}
	}
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
	if !next.IsZero() {
		c.timer = time.AfterFunc(next.Sub(now)+time.Millisecond, c.expire)
	}
	return changed
}

// expire runs when a change's expiry passes.
func (c *Cache) expire() {
	c.mu.Lock()
	changed := c.recomputeLocked()
	ov := c.overlay
	c.mu.Unlock()
	if changed {
		c.cfg.Logger.Info("live limit expired; the configured limit applies again")
		c.notify(ov)
	}
}

func (c *Cache) computeLocked(now time.Time) Overlay {
	ov := Overlay{}
	for _, t := range c.targets {
		var key string
		var ch Change
		found := false
		keys := []string{t.key(c.cfg.Prefix), TierKey(c.cfg.Prefix, t.Tier)}
		if t.Name != "" {
			keys = keys[:1]
		}
		for _, k := range keys {
			if g, ok := c.good[k]; ok && !g.Expired(now) {
				key, ch, found = k, g, true
				break
			}
		}
		if !found {
			continue
		}
		if ov[t.Class] == nil {
			ov[t.Class] = map[string]Applied{}
		}
		ov[t.Class][t.At()] = Applied{Limit: ch.Apply(t.Limit), Source: key, RolloutPercent: ch.RolloutPercent, Shadow: ch.Shadow, ExpiresAt: ch.ExpiresAt}
	}
	return ov
}

func (c *Cache) notify(ov Overlay) {
	if c.cfg.OnChange == nil {
		return
	}
	c.changeMu.Lock()
	defer c.changeMu.Unlock()
	c.cfg.OnChange(ov)
}

// Run reads every hash, then keeps the cache current until ctx is done:
// notifications through the backend's subscription, a full re-read every
// RefreshInterval and on every (re)subscription. Read errors are logged
// and the last values kept. Run blocks.
func (c *Cache) Run(ctx context.Context) {
	refresh := func(why string) {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if err := c.Refresh(rctx); err != nil && ctx.Err() == nil {
			c.cfg.Logger.Warn("live limits: refresh failed; the last values read keep applying",
				slog.String("reason", why), slog.String("error", err.Error()))
		}
	}
	go c.cfg.Backend.Subscribe(ctx, func(key string) {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if err := c.Refresh(rctx, key); err != nil && ctx.Err() == nil {
			c.cfg.Logger.Warn("live limits: read after notification failed", slog.String("key", key), slog.String("error", err.Error()))
		}
	}, func() { refresh("subscribed") })
	tick := time.NewTicker(c.cfg.RefreshInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			c.mu.Lock()
			if c.timer != nil {
				c.timer.Stop()
			}
			c.mu.Unlock()
			return
		case <-tick.C:
			refresh("periodic")
		}
	}
}
