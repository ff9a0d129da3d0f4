package shares_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/eventually"
	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
	"github.com/rl-exporter/rl-exporter/limiter/shares"
)

// newRedisStore is one replica's Redis store on srv, on a client of its own.
func newRedisStore(t testing.TB, srv *redistest.Server) *redisstore.Store {
	t.Helper()
	c, err := redisstore.ClientConfig{URL: srv.URL()}.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	st, err := redisstore.New(c, redisstore.Config{Prefix: "shares-test"})
	if err != nil {
		t.Fatal(err)
	}
	// Closed before its client (cleanups run last first): its batch senders give their
	// connections back rather than find them closed under them.
	t.Cleanup(func() { _ = st.Close(context.Background()) })
	return st
}

// clock is a controllable clock, safe for concurrent use.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Now()} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// remaining is what the shared store has left of key under lim, by a peek on it.
func remaining(t *testing.T, st limiter.Store, lim limiter.Limit, key string) int64 {
	t.Helper()
	l, err := limiter.New(limiter.Config{Limit: lim, Store: st, FailPolicy: limiter.FailClosed, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	d, err := l.Peek(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return d.Remaining
}

func newLimiter(t testing.TB, lim limiter.Limit, st limiter.Store) *limiter.Limiter {
	t.Helper()
	l, err := limiter.New(limiter.Config{Limit: lim, Store: st, FailPolicy: limiter.FailClosed, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestChunkSize(t *testing.T) {
	for _, c := range []struct {
		last, demand, cost, max, want int64
	}{
		{0, 1, 1, 100, 2},      // a new key starts small
		{0, 41, 1, 100, 82},    // a rising demand doubles
		{0, 60, 1, 100, 100},   // at most MaxFraction of the quota
		{50, 3, 1, 100, 50},    // the last interval's demand
		{50, 3, 200, 100, 200}, // never below the cost
	} {
		if got := shares.ChunkSize(c.last, c.demand, c.cost, c.max); got != c.want {
			t.Errorf("chunkSize(last %d, demand %d, cost %d, max %d) = %d, want %d", c.last, c.demand, c.cost, c.max, got, c.want)
		}
	}
}

// TestSharesDecideLocallyAndGiveBack: a key's first 3 decisions in an interval are made on
// the shared store (a cold key's chunk would cost a reservation and a give-back for fewer
// decisions); the next take chunks growing with its demand,
// a handful of reservations for a hundred decisions; the next interval's chunk is the last
// interval's demand; an idle key's chunk goes back at the next sweep, so that the shared store
// counts exactly what was admitted.
func TestSharesDecideLocallyAndGiveBack(t *testing.T) {
	srv := redistest.Single(t)
	redis := newRedisStore(t, srv)
	clk := newClock()
	st := shares.NewManual(t, shares.Config{Store: redis, Now: clk.Now, Interval: time.Second})
	lim := limiter.Limit{Algorithm: limiter.GCRA, Rate: 1000, Period: time.Hour} // no refill to speak of
	l := newLimiter(t, lim, st)
	ctx := context.Background()
	for i := range 100 {
		if d, err := l.Allow(ctx, "k"); err != nil || !d.Allowed {
			t.Fatalf("decision %d: %+v, %v", i, d, err)
		}
	}
	if n := st.Stats().Reserves; n > 3 {
		t.Errorf("100 decisions in one interval took %d reservations, want 3 (3 plain decisions, then chunks of 8, 24 and 72)", n)
	}
	clk.Advance(time.Second)
	st.Sweep(clk.Now()) // the chunk is one interval old: given back, the demand of 100 kept
	eventually.True(t, 5*time.Second, "the old chunk given back", func() bool {
		return remaining(t, redis, lim, "k") == 900
	})
	before := st.Stats().Reserves
	if d, err := l.Allow(ctx, "k"); err != nil || !d.Allowed {
		t.Fatalf("after the sweep: %+v, %v", d, err)
	}
	if got := remaining(t, redis, lim, "k"); got != 800 {
		t.Errorf("after the sweep the chunk is the last interval's demand: shared store has %d left, want 800", got)
	}
	if n := st.Stats().Reserves - before; n != 1 {
		t.Errorf("%d reservations for one decision, want 1", n)
	}
	st.Sweep(clk.Now()) // not idle yet: this interval asked 1
	st.Sweep(clk.Now()) // idle for an interval: given back
	eventually.True(t, 5*time.Second, "the idle key's chunk given back", func() bool {
		return remaining(t, redis, lim, "k") == 899
	})
}

// TestSharesServeASlowKeyFromChunksOfSeveralIntervals: a key asking about one unit an interval
// (10,000 keys at 100,000 decisions/s each ask that much) is decided from chunks that last
// several intervals, a few store calls for forty decisions instead of forty; once it stops
// asking, its chunk goes back within slowSpans intervals, so that the shared store counts
// exactly what was admitted.
func TestSharesServeASlowKeyFromChunksOfSeveralIntervals(t *testing.T) {
	srv := redistest.Single(t)
	redis := newRedisStore(t, srv)
	clk := newClock()
	st := shares.NewManual(t, shares.Config{Store: redis, Now: clk.Now})
	lim := limiter.Limit{Algorithm: limiter.GCRA, Rate: 1000, Period: time.Hour}
	l := newLimiter(t, lim, st)
	ctx := context.Background()
	for i := range 40 {
		if d, err := l.Allow(ctx, "k"); err != nil || !d.Allowed {
			t.Fatalf("decision %d: %+v, %v", i, d, err)
		}
		clk.Advance(shares.DefaultInterval)
		st.Sweep(clk.Now())
	}
	s := st.Stats()
	if calls := s.Plain + s.Reserves + s.Settles; calls > 12 {
		t.Errorf("40 decisions, one an interval, cost %d store calls (%d plain, %d chunks, %d given back), want at most 12", calls, s.Plain, s.Reserves, s.Settles)
	}
	for range shares.SlowSpans {
		clk.Advance(shares.DefaultInterval)
		st.Sweep(clk.Now())
	}
	eventually.True(t, 5*time.Second, "the stopped key's chunk given back", func() bool {
		return remaining(t, redis, lim, "k") == 960
	})
}

// TestSharesKeepARareKeyOnTheSharedStore: a key asking one unit every five intervals would
// spend a reservation and a give-back on fewer decisions than coldDemand; it is decided on the
// shared store as without shares.
func TestSharesKeepARareKeyOnTheSharedStore(t *testing.T) {
	srv := redistest.Single(t)
	clk := newClock()
	st := shares.NewManual(t, shares.Config{Store: newRedisStore(t, srv), Now: clk.Now})
	l := newLimiter(t, limiter.Limit{Algorithm: limiter.GCRA, Rate: 1000, Period: time.Hour}, st)
	for i := range 50 {
		if i%5 == 0 {
			if d, err := l.Allow(context.Background(), "k"); err != nil || !d.Allowed {
				t.Fatalf("decision %d: %+v, %v", i, d, err)
			}
		}
		clk.Advance(shares.DefaultInterval)
		st.Sweep(clk.Now())
	}
	if s := st.Stats(); s.Reserves != 0 || s.Plain != 10 {
		t.Errorf("10 rare decisions: %d chunks, %d plain; want 0 and 10", s.Reserves, s.Plain)
	}
}

// TestSharesTakeWhatIsLeft: a replica refused its chunk takes what the shared store has left
// when it covers the cost; refused outright, it refuses locally until the shared store's
// RetryAfter or one interval, whichever is sooner, without asking again.
func TestSharesTakeWhatIsLeft(t *testing.T) {
	srv := redistest.Single(t)
	clk := newClock()
	lim := limiter.Limit{Algorithm: limiter.FixedWindow, Rate: 20, Period: time.Hour, AlignWindows: true}
	a := shares.NewManual(t, shares.Config{Store: newRedisStore(t, srv), Now: clk.Now, MaxFraction: 1})
	b := shares.NewManual(t, shares.Config{Store: newRedisStore(t, srv), Now: clk.Now, MaxFraction: 1})
	la, lb := newLimiter(t, lim, a), newLimiter(t, lim, b)
	ctx := context.Background()
	for range 4 { // 3 plain decisions and a chunk of 8: 11 of 20 taken by a
		if d, err := la.Allow(ctx, "k"); err != nil || !d.Allowed {
			t.Fatalf("a: %+v, %v", d, err)
		}
	}
	for i := range 9 { // b decides 3 plainly, then asks a chunk of 8 with 6 left and takes them
		if d, err := lb.Allow(ctx, "k"); err != nil || !d.Allowed {
			t.Fatalf("b decision %d: %+v, %v", i, d, err)
		}
	}
	d, err := lb.Allow(ctx, "k")
	if err != nil || d.Allowed {
		t.Fatalf("b past the quota: %+v, %v; want refused", d, err)
	}
	if d.RetryAfter <= 0 {
		t.Errorf("refusal without RetryAfter: %+v", d)
	}
	n := b.Stats().Reserves
	for range 10 {
		if d, err := lb.Allow(ctx, "k"); err != nil || d.Allowed {
			t.Fatalf("b past the quota: %+v, %v; want refused", d, err)
		}
	}
	if got := b.Stats().Reserves - n; got != 0 {
		t.Errorf("refusals within the interval asked the shared store %d times, want 0", got)
	}
	clk.Advance(shares.DefaultInterval)
	if d, err := lb.Allow(ctx, "k"); err != nil || d.Allowed {
		t.Fatalf("b past the quota: %+v, %v; want refused", d, err)
	}
	if got := b.Stats().Reserves - n; got != 1 {
		t.Errorf("one interval later the shared store was asked %d times, want 1", got)
	}
}

// TestSharesCloseGivesBack: Close settles every chunk at what was used.
func TestSharesCloseGivesBack(t *testing.T) {
	srv := redistest.Single(t)
	redis := newRedisStore(t, srv)
	st, err := shares.New(shares.Config{Store: redis})
	if err != nil {
		t.Fatal(err)
	}
	lim := limiter.Limit{Algorithm: limiter.SlidingWindow, Rate: 1000, Period: time.Hour}
	l := newLimiter(t, lim, st)
	for i := range 30 {
		if d, err := l.Allow(context.Background(), fmt.Sprint("k", i%3)); err != nil || !d.Allowed {
			t.Fatalf("%+v, %v", d, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := st.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if got := remaining(t, redis, lim, fmt.Sprint("k", i)); got != 990 {
			t.Errorf("key k%d after Close: %d left, want 990", i, got)
		}
	}
}

// TestSharesRefuseLeakyBucketWithDelay: leaky_bucket's admissions carry a Delay that a share
// would lose.
func TestSharesRefuseLeakyBucketWithDelay(t *testing.T) {
	srv := redistest.Single(t)
	st := shares.NewManual(t, shares.Config{Store: newRedisStore(t, srv)})
	_, err := st.Decide(context.Background(), "k", limiter.PerSecond(limiter.LeakyBucket, 10), 1)
	if err == nil {
		t.Fatal("leaky_bucket with delay decided from a share")
	}
	lim := limiter.PerSecond(limiter.LeakyBucket, 10)
	lim.NoDelay = true
	if d, err := st.Decide(context.Background(), "k", lim, 1); err != nil || !d.Allowed {
		t.Fatalf("leaky_bucket nodelay: %+v, %v", d, err)
	}
}

// TestSharesPassReservationsThrough: a class's cost_from reserves and commits on the shared
// store beside its shares, the commit without waiting.
func TestSharesPassReservationsThrough(t *testing.T) {
	srv := redistest.Single(t)
	redis := newRedisStore(t, srv)
	st := shares.NewManual(t, shares.Config{Store: redis})
	lim := limiter.Limit{Algorithm: limiter.FixedWindow, Rate: 100, Period: time.Hour, AlignWindows: true}
	l := newLimiter(t, lim, st)
	ctx := context.Background()
	r, d, err := l.Reserve(ctx, "k", 10)
	if err != nil || !d.Allowed {
		t.Fatalf("reserve: %+v, %v", d, err)
	}
	if got := remaining(t, redis, lim, "k"); got != 90 {
		t.Fatalf("after reserving 10 the shared store has %d left, want 90", got)
	}
	done := make(chan error, 1)
	l.CommitAsync(ctx, r, 4, func(_ limiter.Settlement, err error) { done <- err })
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := remaining(t, redis, lim, "k"); got != 96 {
		t.Errorf("after committing 4 of 10 the shared store has %d left, want 96", got)
	}
}
