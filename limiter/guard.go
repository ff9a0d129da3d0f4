package limiter

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// GuardConfig configures a Guard.
type GuardConfig struct {
	Store   string        // names the store in logs and to observers ("redis")
	Breaker BreakerConfig // Breaker.Store defaults to Store
	Local   LocalConfig
	Logger  *slog.Logger // default: discard
	// LogInterval spaces the summaries of one reason and node, and bounds a failure's wait to be logged.
	LogInterval time.Duration
	AfterFunc   func(d time.Duration, f func()) (stop func() bool) // default time.AfterFunc
}

// DefaultLogInterval is GuardConfig.LogInterval's default.
const DefaultLogInterval = 10 * time.Second

// Guard is what the Limiters on one store share, made once per store: the
// breaker, so that they open together; the failure log, a summary per
// interval rather than a line per decision; the LocalFallback, so that keys
// keep their budget across reloads. Safe for concurrent use.
type Guard struct {
	breaker    *CircuitBreaker
	local      *LocalFallback
	log        *failureLog
	shards     sync.Map   // shard name → *CircuitBreaker
	shardsMu   sync.Mutex // held to make or drop one
	breakerCfg BreakerConfig
	observer   CircuitObserver
	// refresher is the ShardRefresher of the Limiters' store, if it is one.
	refresher atomic.Pointer[ShardRefresher]
}

func (g *Guard) refreshShards() {
	if r := g.refresher.Load(); r != nil {
		(*r).RefreshShards()
	}
}

// useStore records st's shard lookup, if it has one, for refreshShards.
func (g *Guard) useStore(st ShardedStore) {
	if r, ok := st.(ShardRefresher); ok && g.refresher.Load() == nil {
		g.refresher.Store(&r)
	}
}

// ShardedStore is a store of several servers; Shard names key's ("" when unsharded), so
// that a Guard opens a dead server's circuit alone. Shard must be concurrency-safe and cheap.
type ShardedStore interface {
	Shard(key string) string
}

// ShardRefresher is a ShardedStore that can look its shards up again. While
// a shard's circuit is open no call reaches the store to learn that its
// keys moved (a Cluster master's replica promoted), so the Guard asks on
// every call the circuit refuses; moved keys then name their new shard,
// whose breaker is closed. RefreshShards must return at once, be safe for
// concurrent use and cheap: the store bounds how often it looks.
type ShardRefresher interface {
	ShardedStore
	RefreshShards()
}

// breakerFor returns shard's breaker, reporting as "<store>/<shard>".
func (g *Guard) breakerFor(shard string) *CircuitBreaker {
	if shard == "" || g.breaker == nil {
		return g.breaker
	}
	if b, ok := g.shards.Load(shard); ok {
		return b.(*CircuitBreaker)
	}
	g.shardsMu.Lock()
	defer g.shardsMu.Unlock()
	return g.addShardLocked(shard)
}

func (g *Guard) addShardLocked(shard string) *CircuitBreaker {
	if b, ok := g.shards.Load(shard); ok {
		return b.(*CircuitBreaker)
	}
	cfg := g.breakerCfg
	cfg.Store += "/" + shard
	b := NewCircuitBreaker(cfg)
	b.onRefused = g.refreshShards
	g.shards.Store(shard, b)
	if o, ok := g.observer.(CircuitSetObserver); ok {
		o.CircuitAdded(cfg.Store, CircuitClosed)
	}
	return b
}

// CircuitSetObserver is also told when a shard's breaker is made and
// dropped. It is called under the Guard's and the breaker's locks: it must
// be quick and must not call back.
type CircuitSetObserver interface {
	CircuitObserver
	CircuitAdded(store string, state CircuitState)
	CircuitRemoved(store string) // it will not report again
}

// SetShards drops the breakers of shards no longer listed; new ones get a closed
// breaker. Safe for concurrent use.
func (g *Guard) SetShards(shards []string) {
	if g.breaker == nil {
		return
	}
	keep := make(map[string]bool, len(shards))
	for _, s := range shards {
		if s != "" {
			keep[s] = true
		}
	}
	g.shardsMu.Lock()
	defer g.shardsMu.Unlock()
	o, _ := g.observer.(CircuitSetObserver)
	g.shards.Range(func(k, v any) bool {
		if keep[k.(string)] {
			return true
		}
		g.shards.Delete(k)
		v.(*CircuitBreaker).forget(func(store string) {
			if o != nil {
				o.CircuitRemoved(store)
			}
		})
		return true
	})
	for s := range keep {
		g.addShardLocked(s)
	}
}

// Shards returns the shards with a breaker, in no order. Safe for concurrent use.
func (g *Guard) Shards() []string {
	var out []string
	g.shards.Range(func(k, _ any) bool {
		out = append(out, k.(string))
		return true
	})
	return out
}

// NewGuard returns a Guard.
func NewGuard(cfg GuardConfig) *Guard {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.LogInterval <= 0 {
		cfg.LogInterval = DefaultLogInterval
	}
	if cfg.Breaker.Store == "" {
		cfg.Breaker.Store = cfg.Store
	}
	g := &Guard{local: NewLocalFallback(cfg.Local)}
	g.log = &failureLog{logger: cfg.Logger, store: cfg.Store, interval: cfg.LogInterval, now: cfg.Breaker.Now, afterFunc: cfg.AfterFunc}
	if g.log.now == nil {
		g.log.now = time.Now
	}
	if g.log.afterFunc == nil {
		g.log.afterFunc = func(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }
	}
	g.observer = cfg.Breaker.Observer
	cfg.Breaker.Observer = transitionLog{next: cfg.Breaker.Observer, log: g.log}
	g.breaker = NewCircuitBreaker(cfg.Breaker)
	g.breakerCfg = cfg.Breaker
	return g
}

// Breaker returns the circuit breaker, nil when it is disabled.
func (g *Guard) Breaker() *CircuitBreaker { return g.breaker }

// Local returns FailLocal's LocalFallback.
func (g *Guard) Local() *LocalFallback { return g.local }

// Close logs the pending summaries and stops their timers; later failures
// are not summarised. Call it once, after the last decision; it returns nil.
func (g *Guard) Close() error {
	g.log.close()
	return nil
}

// failureLog logs a (reason, node)'s first failure at once and the next
// ones together when the interval ends; no timer runs while none waits.
type failureLog struct {
	logger    *slog.Logger
	store     string
	interval  time.Duration
	now       func() time.Time
	afterFunc func(time.Duration, func()) func() bool

	mu      sync.Mutex
	closed  bool
	reasons map[failureKey]*failureSummary
}

type failureKey struct{ reason, node string }

type failureSummary struct {
	count    int64 // not logged yet
	lastLine time.Time
	lastErr  string
	stop     func() bool // of the armed timer, or nil
}

func (f *failureLog) failed(ctx context.Context, reason, node string, err error) {
	if !f.logger.Enabled(ctx, slog.LevelWarn) {
		return
	}
	k := failureKey{reason, node}
	now := f.now()
	f.mu.Lock()
	if f.reasons == nil {
		f.reasons = map[failureKey]*failureSummary{}
	}
	s := f.reasons[k]
	if s == nil {
		s = &failureSummary{}
		f.reasons[k] = s
	}
	s.count++
	s.lastErr = err.Error()
	if !s.lastLine.IsZero() && now.Sub(s.lastLine) < f.interval {
		if s.stop == nil && !f.closed {
			s.stop = f.afterFunc(s.lastLine.Add(f.interval).Sub(now), func() { f.due(k) })
		}
		f.mu.Unlock()
		return
	}
	if s.stop != nil {
		s.stop()
		s.stop = nil
	}
	count, since, msg := s.count, s.lastLine, s.lastErr
	s.count, s.lastLine = 0, now
	f.mu.Unlock()
	f.line(ctx, k, count, since, now, msg)
}

func (f *failureLog) due(k failureKey) {
	now := f.now()
	f.mu.Lock()
	s := f.reasons[k]
	if s == nil || s.stop == nil {
		// logged or flushed since the timer was armed
		f.mu.Unlock()
		return
	}
	s.stop = nil
	count, since, msg := s.count, s.lastLine, s.lastErr
	s.count, s.lastLine = 0, now
	f.mu.Unlock()
	if count > 0 {
		f.line(context.Background(), k, count, since, now, msg)
	}
}

func (f *failureLog) line(ctx context.Context, k failureKey, count int64, since, now time.Time, msg string) {
	attrs := []slog.Attr{slog.String("store", f.store), slog.String("reason", k.reason)}
	if k.node != "" {
		attrs = append(attrs, slog.String("node", k.node))
	}
	attrs = append(attrs, slog.Int64("failures", count))
	if !since.IsZero() {
		attrs = append(attrs, slog.Duration("over", now.Sub(since).Round(time.Millisecond)))
	}
	attrs = append(attrs, slog.String("last_error", msg))
	f.logger.LogAttrs(ctx, slog.LevelWarn, "rate limit store failing", attrs...)
}

func (f *failureLog) flush() {
	now := f.now()
	type pending struct {
		k     failureKey
		msg   string
		count int64
		since time.Time
	}
	var out []pending
	f.mu.Lock()
	for k, s := range f.reasons {
		if s.stop != nil {
			s.stop()
		}
		if s.count > 0 {
			out = append(out, pending{k, s.lastErr, s.count, s.lastLine})
		}
		delete(f.reasons, k)
	}
	f.mu.Unlock()
	for _, p := range out {
		f.line(context.Background(), p.k, p.count, p.since, now, p.msg)
	}
}

func (f *failureLog) close() {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	f.flush()
}

type transitionLog struct {
	next CircuitObserver
	log  *failureLog
}

func (t transitionLog) CircuitChanged(store string, from, to CircuitState) {
	if t.next != nil {
		t.next.CircuitChanged(store, from, to)
	}
	level := slog.LevelWarn
	if to == CircuitClosed {
		level = slog.LevelInfo
		// Under the breaker's lock: flush takes only the log's.
		t.log.flush()
	}
	t.log.logger.LogAttrs(context.Background(), level, "rate limit circuit "+to.String(),
		slog.String("store", store), slog.String("from", from.String()), slog.String("to", to.String()))
}
