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
	// failure reason. Default DefaultLogInterval.
	LogInterval time.Duration
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
	breakerCfg BreakerConfig
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
	cfg := g.breakerCfg
	cfg.Store += "/" + shard
	b, _ := g.shards.LoadOrStore(shard, NewCircuitBreaker(cfg))
	return b.(*CircuitBreaker)
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
	g.log = &failureLog{logger: cfg.Logger, store: cfg.Store, interval: cfg.LogInterval, now: cfg.Breaker.Now}
	if g.log.now == nil {
		g.log.now = time.Now
	}
	cfg.Breaker.Observer = transitionLog{next: cfg.Breaker.Observer, log: g.log}
	g.breaker = NewCircuitBreaker(cfg.Breaker)
	g.breakerCfg = cfg.Breaker
	return g
}

// Breaker returns the circuit breaker, nil when it is disabled.
func (g *Guard) Breaker() *CircuitBreaker { return g.breaker }

// Local returns the local decisions of FailLocal.
func (g *Guard) Local() *LocalFallback { return g.local }

// failureLog writes store failures as summaries: the first failure of a
// reason is logged at once, the following ones are counted and logged
// together at most once per interval.
type failureLog struct {
	logger   *slog.Logger
	store    string
	interval time.Duration
	now      func() time.Time

	mu      sync.Mutex
	reasons map[string]*failureSummary
}

type failureSummary struct {
	count    int64 // failures not logged yet
	lastLine time.Time
	lastErr  string
}

// failed counts one failure of the given reason (ErrorKind).
func (f *failureLog) failed(ctx context.Context, reason string, err error) {
	if !f.logger.Enabled(ctx, slog.LevelWarn) {
		return
	}
	now := f.now()
	f.mu.Lock()
	if f.reasons == nil {
		f.reasons = map[string]*failureSummary{}
	}
	s := f.reasons[reason]
	if s == nil {
		s = &failureSummary{}
		f.reasons[reason] = s
	}
	s.count++
	s.lastErr = err.Error()
	if !s.lastLine.IsZero() && now.Sub(s.lastLine) < f.interval {
		f.mu.Unlock()
		return
	}
	count, since, msg := s.count, s.lastLine, s.lastErr
	s.count, s.lastLine = 0, now
	f.mu.Unlock()
	f.line(ctx, reason, count, since, now, msg)
}

func (f *failureLog) line(ctx context.Context, reason string, count int64, since, now time.Time, msg string) {
	attrs := []slog.Attr{slog.String("store", f.store), slog.String("reason", reason), slog.Int64("failures", count)}
	if !since.IsZero() {
		attrs = append(attrs, slog.Duration("over", now.Sub(since).Round(time.Millisecond)))
	}
	attrs = append(attrs, slog.String("last_error", msg))
	f.logger.LogAttrs(ctx, slog.LevelWarn, "rate limit store failing", attrs...)
}

// flush logs the failures counted since each reason's last line.
func (f *failureLog) flush() {
	now := f.now()
	type pending struct {
		reason, msg string
		count       int64
		since       time.Time
	}
	var out []pending
	f.mu.Lock()
	for r, s := range f.reasons {
		if s.count > 0 {
			out = append(out, pending{r, s.lastErr, s.count, s.lastLine})
		}
		delete(f.reasons, r)
	}
	f.mu.Unlock()
	for _, p := range out {
		f.line(context.Background(), p.reason, p.count, p.since, now, p.msg)
	}
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
