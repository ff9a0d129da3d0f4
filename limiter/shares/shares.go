package shares

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/summarylog"
	"github.com/rl-exporter/rl-exporter/limiter"
)

// DefaultInterval is Config.Interval's default: how long a chunk may be used, and how often
// idle keys give theirs back.
const DefaultInterval = 100 * time.Millisecond

// DefaultMaxFraction is Config.MaxFraction's default: a chunk is at most a tenth of the quota,
// so that one replica cannot hold a key's whole quota while the others refuse.
const DefaultMaxFraction = 0.1

// Config configures a Store; optional fields' zero values are defaults.
type Config struct {
	// Store is the shared store the units are reserved from; required.
	Store limiter.Reserver
	// Interval is how long a busy key's chunk may be used after it was taken (a slow key's,
	// up to 10 of them), and how often idle keys' chunks are given back; default
	// DefaultInterval.
	Interval time.Duration
	// MaxFraction bounds a chunk to this fraction of the quota (but never below the cost
	// asked); in (0, 1], default DefaultMaxFraction.
	MaxFraction float64
	// Timeout bounds a give-back, which no caller waits for; default half the reservations'
	// hold (10 intervals, at least 1s), so that a slow Redis still gets the units back before
	// the reservation expires charged.
	Timeout time.Duration
	// Now is the clock of the intervals and of LogInterval; default time.Now. The windows and
	// buckets are on the shared store's clock.
	Now func() time.Time
	// Logger receives a warning for the give-backs the shared store did not acknowledge: the
	// first at once, then a line each LogInterval at most with their count (occurrences) and
	// unused units (units). Its attributes name the Store (serve's: the class). Default: discard.
	Logger *slog.Logger
	// LogInterval spaces those lines; default limiter.DefaultLogInterval.
	LogInterval time.Duration
}

// Supports reports whether lim's algorithm can be decided from a share: all but leaky_bucket
// without NoDelay, whose admissions carry a Delay each.
func Supports(lim limiter.Limit) bool {
	return limiter.SupportsReservations(lim.Algorithm) && (lim.Algorithm != limiter.LeakyBucket || lim.NoDelay)
}

// ErrUnsupported is returned, wrapped, by a decision on a limit that Supports refuses.
var ErrUnsupported = errors.New("shares: leaky_bucket without nodelay cannot be decided from a share")

// Store is a limiter.Store that decides from local shares of the limits kept in Config.Store.
// Peeks, at-most decisions, resets and reservations go to the shared store. Safe for
// concurrent use; call Close once, after the last decision.
type Store struct {
	inner    limiter.Reserver
	interval time.Duration
	hold     time.Duration
	timeout  time.Duration
	fraction float64
	now      func() time.Time
	seed     maphash.Seed
	shards   [numShards]shard

	stop, done chan struct{} // the sweeper's; nil when none runs
	closed     atomic.Bool
	settles    sync.WaitGroup // give-backs in flight
	stats      counters
	lostLog    *summarylog.Line // give-backs that failed
}

const numShards = 64

type shard struct {
	mu sync.Mutex
	m  map[shareKey]*share
}

// shareKey names a share: the same key under two limits has two.
type shareKey struct {
	lim limiter.Limit
	key string
}

// New validates cfg and returns a Store whose sweeper gives back idle and old chunks every
// Interval until Close.
func New(cfg Config) (*Store, error) {
	s, err := newStore(cfg)
	if err != nil {
		return nil, err
	}
	s.stop, s.done = make(chan struct{}), make(chan struct{})
	go s.sweepEvery()
	return s, nil
}

func newStore(cfg Config) (*Store, error) {
	if cfg.Store == nil {
		return nil, errors.New("shares: Store is required")
	}
	if cfg.Interval < 0 || cfg.Timeout < 0 || cfg.LogInterval < 0 {
		return nil, fmt.Errorf("shares: interval, timeout and log interval must be >= 0, got %s, %s and %s", cfg.Interval, cfg.Timeout, cfg.LogInterval)
	}
	if cfg.MaxFraction < 0 || cfg.MaxFraction > 1 {
		return nil, fmt.Errorf("shares: max fraction must be in (0, 1], got %g", cfg.MaxFraction)
	}
	s := &Store{
		inner:    cfg.Store,
		interval: cfg.Interval,
		timeout:  cfg.Timeout,
		fraction: cfg.MaxFraction,
		now:      cfg.Now,
		seed:     maphash.MakeSeed(),
	}
	if s.interval == 0 {
		s.interval = DefaultInterval
	}
	if s.fraction == 0 {
		s.fraction = DefaultMaxFraction
	}
	if s.now == nil {
		s.now = time.Now
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s.lostLog = summarylog.NewAt(logger, slog.LevelWarn, cmp.Or(cfg.LogInterval, limiter.DefaultLogInterval), s.now)
	// A chunk is settled within its life (at most slowSpans intervals), a sweep and a settle's
	// timeout; its reservation outlives that by far, so that only a replica gone leaves it to
	// expire, charged: the units it may have used stay spent.
	s.hold = max(2*slowSpans*s.interval, 2*time.Second)
	if s.timeout == 0 {
		s.timeout = s.hold / 2
	}
	for i := range s.shards {
		s.shards[i].m = map[shareKey]*share{}
	}
	return s, nil
}

// Interval is Config.Interval with its default.
func (s *Store) Interval() time.Duration { return s.interval }

// Name is the shared store's name, so that logs and metrics name the store that holds the state.
func (s *Store) Name() string { return s.inner.Name() }

// Decide takes cost units of key's share under lim, reserving a chunk from the shared store
// when the share has too few. It waits only for that reservation, once per chunk.
func (s *Store) Decide(ctx context.Context, key string, lim limiter.Limit, cost int64) (limiter.Decision, error) {
	return s.DecideMode(ctx, key, lim, cost, limiter.ModeConsume, s.timeout)
}

// DecideMode implements limiter.Inspector: ModeConsume from the share, other modes on the
// shared store (an error when it is no Inspector). A timeout > 0 bounds a chunk's reservation.
func (s *Store) DecideMode(ctx context.Context, key string, lim limiter.Limit, cost int64, mode limiter.Mode, timeout time.Duration) (limiter.Decision, error) {
	if mode != limiter.ModeConsume || s.closed.Load() {
		in, ok := s.inner.(limiter.Inspector)
		if !ok {
			if mode == limiter.ModeConsume {
				return s.inner.Decide(ctx, key, lim, cost)
			}
			return limiter.Decision{}, fmt.Errorf("%s store: %w", s.Name(), limiter.ErrNotSupported)
		}
		return in.DecideMode(ctx, key, lim, cost, mode, timeout)
	}
	if !Supports(lim) {
		return limiter.Decision{}, ErrUnsupported
	}
	return s.consume(ctx, shareKey{lim, key}, cost, timeout)
}

// Reset gives key's chunk under lim back and resets the key on the shared store.
func (s *Store) Reset(ctx context.Context, key string, lim limiter.Limit, timeout time.Duration) error {
	k := shareKey{lim, key}
	sh := s.shardOf(key)
	sh.mu.Lock()
	var old chunk
	if e := sh.m[k]; e != nil && e.filling == nil {
		old = e.detach()
		delete(sh.m, k)
	}
	sh.mu.Unlock()
	s.giveBack(k, old)
	in, ok := s.inner.(limiter.Inspector)
	if !ok {
		return fmt.Errorf("%s store: %w", s.Name(), limiter.ErrNotSupported)
	}
	return in.Reset(ctx, key, lim, timeout)
}

func (s *Store) shardOf(key string) *shard {
	return &s.shards[maphash.String(s.seed, key)%numShards]
}

// Close stops the sweeper and gives every chunk's unused units back, waiting for the shared
// store's answers until ctx ends; decisions after it go to the shared store. Call it before
// closing the shared store.
func (s *Store) Close(ctx context.Context) error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	if s.stop != nil {
		close(s.stop)
		<-s.done
	}
	if err := s.drain(ctx); err != nil {
		return fmt.Errorf("shares: closed before every reservation in flight was answered: %w", err)
	}
	done := make(chan struct{})
	go func() { s.settles.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("shares: closed before every chunk was given back: %w", ctx.Err())
	}
	if n := s.stats.settleErrors.Load(); n > 0 {
		return fmt.Errorf("shares: %d chunks could not be given back, their reservations expire charged; the first: %w", n, *s.stats.firstErr.Load())
	}
	return nil
}

// Reserve, Settle, Charge and Renew are the shared store's: a reservation is taken from it
// directly, beside the shares.
func (s *Store) Reserve(ctx context.Context, key string, lim limiter.Limit, r limiter.ReserveRequest, timeout time.Duration) (limiter.Decision, error) {
	return s.inner.Reserve(ctx, key, lim, r, timeout)
}

// Settle is the shared store's (see Reserve).
func (s *Store) Settle(ctx context.Context, key string, lim limiter.Limit, id string, actual int64, timeout time.Duration) (limiter.Settlement, error) {
	return s.inner.Settle(ctx, key, lim, id, actual, timeout)
}

// Charge is the shared store's (see Reserve).
func (s *Store) Charge(ctx context.Context, key string, lim limiter.Limit, cost int64, timeout time.Duration) (limiter.Settlement, error) {
	return s.inner.Charge(ctx, key, lim, cost, timeout)
}

// Renew is the shared store's (see Reserve).
func (s *Store) Renew(ctx context.Context, key string, lim limiter.Limit, id string, hold time.Duration, timeout time.Duration) (limiter.Renewal, error) {
	return s.inner.Renew(ctx, key, lim, id, hold, timeout)
}

// SettleAsync is the shared store's, so that a proxy's commit does not wait (see Reserve); on
// a shared store that is no AsyncSettler it settles on a goroutine of its own.
func (s *Store) SettleAsync(ctx context.Context, key string, lim limiter.Limit, id string, actual int64, timeout time.Duration, then func(limiter.Settlement, error)) {
	if as, ok := s.inner.(limiter.AsyncSettler); ok {
		as.SettleAsync(ctx, key, lim, id, actual, timeout, then)
		return
	}
	go func() { then(s.inner.Settle(ctx, key, lim, id, actual, timeout)) }()
}

var (
	_ limiter.Inspector    = (*Store)(nil)
	_ limiter.AsyncSettler = (*Store)(nil)
)
