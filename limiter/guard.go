package limiter

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// GuardConfig configures a Guard.
type GuardConfig struct {
	// Store names the store in logs and in CircuitObserver calls ("redis").
	Store string
	// Breaker configures the circuit breaker; Threshold 0 disables it.
	// Breaker.Store defaults to Store.
	Breaker BreakerConfig
	// Local configures the decisions of FailLocal.
	Local LocalConfig
	// Logger receives the breaker's changes of state and the summaries of
	// store failures. Default: discard.
	Logger *slog.Logger
	// LogInterval is the least time between two summary lines of the same
	// failure reason on the same node, and the most a failure waits to be
	// logged. Default DefaultLogInterval.
	LogInterval time.Duration
	// AfterFunc arms the timer that logs a summary at the end of its
	// interval, and returns what stops it; default time.AfterFunc. Tests
	// inject a fake clock's.
	AfterFunc func(d time.Duration, f func()) (stop func() bool)
}

// DefaultLogInterval is the default least time between two log lines
// summarising store failures of one reason.
const DefaultLogInterval = 10 * time.Second

// Guard is what every Limiter on one store shares: the circuit breaker (so
// that they open together), the log of store failures (a summary per
// reason at most once per interval, with counts, instead of a line per
// decision) and the local decisions of FailLocal (so that a key keeps its
// budget across reloads). Make one per store at start-up and pass it in
// Config.Guard of every Limiter. Safe for concurrent use.
type Guard struct {
	breaker *CircuitBreaker
	local   *LocalFallback
	log     *failureLog
	// shards are the breakers of a ShardedStore's servers, by shard name
	// (string → *CircuitBreaker), made on first use with breakerCfg.
	shards     sync.Map
	shardsMu   sync.Mutex // held to make or drop a shard's breaker
	breakerCfg BreakerConfig
	// observer is the CircuitObserver of the config, told of the shards'
	// breakers made and dropped.
	observer CircuitObserver
}

// ShardedStore is a store whose keys are decided by separate servers (the
// masters of a Redis Cluster): Shard names the server deciding key ("" when
// the store is not sharded). A Guard keeps one circuit breaker per shard, so
// that a dead server opens the circuit for its own keys only. Shard must be
// safe for concurrent use and cheap.
type ShardedStore interface {
	Shard(key string) string
}

// breakerFor returns the breaker of shard: the Guard's own for "", else one
// of the shard's own, whose changes of state are reported under the store
// name "<store>/<shard>".
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

// addShardLocked returns shard's breaker, made and announced to a
// CircuitSetObserver when new. g.shardsMu is held.
func (g *Guard) addShardLocked(shard string) *CircuitBreaker {
	if b, ok := g.shards.Load(shard); ok {
		return b.(*CircuitBreaker)
	}
	cfg := g.breakerCfg
	cfg.Store += "/" + shard
	b := NewCircuitBreaker(cfg)
	g.shards.Store(shard, b)
	if o, ok := g.observer.(CircuitSetObserver); ok {
		o.CircuitAdded(cfg.Store, CircuitClosed)
	}
	return b
}

// CircuitSetObserver is a CircuitObserver that keeps a state per breaker
// (the collector's rate_limit_circuit_state series) and is also told when
// a shard's breaker is made and when it is dropped because its shard left
// the store (see Guard.SetShards). Its methods are called with the Guard's
// and the breaker's locks held: they must be quick and must not call back.
type CircuitSetObserver interface {
	CircuitObserver
	// CircuitAdded: a breaker named store now exists, in state.
	CircuitAdded(store string, state CircuitState)
	// CircuitRemoved: the breaker named store is gone and will not
	// report again.
	CircuitRemoved(store string)
}

// SetShards tells the Guard which shards the store has now (the masters of
// a Redis Cluster's current slot map): the breakers of shards not in the
// list are dropped, and no longer report, while the listed shards without
// one get a closed breaker. The CircuitObserver, when a CircuitSetObserver,
// is told of both. A shard dropped here and still named by a stale slot map
// gets a new breaker on its next call. Without a breaker it does nothing.
// Safe for concurrent use with decisions.
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

// Shards returns the shards that have a breaker, in no order, for tests and
// diagnostics. Safe for concurrent use.
func (g *Guard) Shards() []string {
	var out []string
	g.shards.Range(func(k, _ any) bool {
		out = append(out, k.(string))
		return true
	})
	return out
}

// NewGuard returns a Guard configured by cfg.
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

// Local returns the local decisions of FailLocal.
func (g *Guard) Local() *LocalFallback { return g.local }

// Close logs the failures not summarised yet and stops the summaries'
// timers; failures after it are still logged at once but no longer
// summarised later. Call it once, after the last decision on the store;
// safe to call concurrently with decisions. It returns nil.
func (g *Guard) Close() error {
	g.log.close()
	return nil
}

// failureLog writes store failures as summaries, one per reason and node:
// the first failure of a (reason, node) is logged at once, the following
// ones are counted and logged together by a timer armed for the end of the
// interval, so that a summary is never more than one interval late and
// names the last error of its own reason and node. No timer runs while no
// failure waits to be logged; close stops them.
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

// failureKey is what one summary line covers.
type failureKey struct{ reason, node string }

type failureSummary struct {
	count    int64 // failures not logged yet
	lastLine time.Time
	lastErr  string
	// stop stops the timer that logs count; nil while none is armed.
	stop func() bool
}

// failed counts one failure of the given reason (ErrorKind) on node (the
// shard that failed, "" for an unsharded store).
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

// due is the timer of k's summary: it logs the failures counted since k's
// last line.
func (f *failureLog) due(k failureKey) {
	now := f.now()
	f.mu.Lock()
	s := f.reasons[k]
	if s == nil || s.stop == nil {
		// Logged or flushed since the timer was armed.
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

// flush logs the failures counted since each summary's last line and
// stops the timers.
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

// close flushes the summaries and arms no timer after.
func (f *failureLog) close() {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	f.flush()
}

// transitionLog logs every change of the breaker's state, and on closing
// flushes the failures not summarised yet.
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
		// Called with the breaker's lock held: the flush takes only the
		// log's own lock.
		t.log.flush()
	}
	t.log.logger.LogAttrs(context.Background(), level, "rate limit circuit "+to.String(),
		slog.String("store", store), slog.String("from", from.String()), slog.String("to", to.String()))
}
