package limiter_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// transitions records a breaker's changes of state.
type transitions struct {
	mu   sync.Mutex
	seen []string
}

func (t *transitions) CircuitChanged(store string, from, to limiter.CircuitState) {
	t.mu.Lock()
	t.seen = append(t.seen, fmt.Sprintf("%s:%s->%s", store, from, to))
	t.mu.Unlock()
}

func (t *transitions) list() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.seen, " ")
}

// syncBuffer is a log destination safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestAGuardsBreakerIsSharedByEveryLimiterOnTheStoreAndReportsEachTransitionOnce(t *testing.T) {
	clock := newFakeClock()
	store := &failingStore{err: errStoreDown, healthy: limiter.NewMemoryStore(limiter.MemoryConfig{Now: clock.Now})}
	obs := &transitions{}
	var logs syncBuffer
	g := limiter.NewGuard(limiter.GuardConfig{
		Store:   "flaky",
		Breaker: limiter.BreakerConfig{Threshold: 4, Cooldown: time.Second, Now: clock.Now, Observer: obs},
		Logger:  slog.New(slog.NewTextHandler(&logs, nil)),
	})
	var lims []*limiter.Limiter
	for _, rate := range []int64{10, 20} {
		l, err := limiter.New(limiter.Config{Limit: limiter.PerMinute(limiter.GCRA, rate), Store: store, Guard: g})
		if err != nil {
			t.Fatal(err)
		}
		lims = append(lims, l)
	}
	// Two failures through each limiter: four in a row on the store.
	for i := 0; i < 4; i++ {
		if _, err := lims[i%2].Allow(context.Background(), "k"); !errors.Is(err, errStoreDown) {
			t.Fatalf("failure %d: err = %v", i, err)
		}
	}
	if g.Breaker().State() != limiter.CircuitOpen {
		t.Fatalf("after 4 failures across two limiters the state is %s, want open", g.Breaker().State())
	}
	for _, l := range lims {
		d, err := l.Allow(context.Background(), "k")
		if limiter.ErrorKind(err) != "circuit_open" || d.Failure != limiter.FailureOpen {
			t.Fatalf("open circuit: got %+v, %v", d, err)
		}
	}
	clock.Advance(time.Second)
	store.setErr(nil)
	if _, err := lims[1].Allow(context.Background(), "k"); err != nil {
		t.Fatalf("probe: %v", err)
	}
	if g.Breaker().State() != limiter.CircuitClosed {
		t.Fatalf("after a successful probe the state is %s, want closed", g.Breaker().State())
	}
	if got, want := obs.list(), "flaky:closed->open flaky:open->half_open flaky:half_open->closed"; got != want {
		t.Errorf("transitions %q, want %q", got, want)
	}
	out := logs.String()
	for _, want := range []string{`msg="rate limit circuit open"`, `msg="rate limit circuit half_open"`, `msg="rate limit circuit closed"`} {
		if strings.Count(out, want) != 1 {
			t.Errorf("log has %d lines %s, want 1:\n%s", strings.Count(out, want), want, out)
		}
	}
}

func TestStoreFailuresAreLoggedAsOneSummaryPerReasonAndInterval(t *testing.T) {
	clock := newFakeClock()
	store := &failingStore{err: errStoreDown, healthy: limiter.NewMemoryStore(limiter.MemoryConfig{Now: clock.Now})}
	var logs syncBuffer
	g := limiter.NewGuard(limiter.GuardConfig{
		Store: "flaky", LogInterval: 10 * time.Second,
		Breaker: limiter.BreakerConfig{Now: clock.Now}, // no breaker: every decision fails on the store
		Logger:  slog.New(slog.NewTextHandler(&logs, nil)),
	})
	l, err := limiter.New(limiter.Config{Limit: limiter.PerMinute(limiter.GCRA, 10), Store: store, Guard: g})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 1000; i++ {
		if i == 500 {
			clock.Advance(10 * time.Second)
		}
		if _, err := l.Allow(context.Background(), "k"); err == nil {
			t.Fatal("the store is down but the decision has no error")
		}
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("1000 failures over 10s logged %d lines, want 2 (the first at once, then one summary):\n%s", len(lines), logs.String())
	}
	if !strings.Contains(lines[0], "failures=1 ") || !strings.Contains(lines[1], "failures=500 ") ||
		!strings.Contains(lines[1], "reason=error") || !strings.Contains(lines[1], "over=10s") {
		t.Errorf("summaries do not count the failures by reason:\n%s", logs.String())
	}
}

// cancellingStore is a slow Redis whose caller hangs up: once called, it
// cancels the call's context (hangUp) and waits for the cancellation.
type cancellingStore struct {
	calls  int
	hangUp context.CancelFunc
}

func (s *cancellingStore) Decide(ctx context.Context, _ string, _ limiter.Limit, _ int64) (limiter.Decision, error) {
	s.calls++
	s.hangUp()
	<-ctx.Done()
	return limiter.Decision{}, ctx.Err()
}

func (*cancellingStore) Name() string { return "slow" }

func TestACallersCancellationIsNeitherAFailOpenNorABreakerFailure(t *testing.T) {
	obs := &transitions{}
	storeErrs := 0
	g := limiter.NewGuard(limiter.GuardConfig{Store: "slow", Breaker: limiter.BreakerConfig{Threshold: 2, Observer: obs}})
	store := &cancellingStore{}
	l, err := limiter.New(limiter.Config{Limit: limiter.PerMinute(limiter.GCRA, 10), Store: store, Guard: g,
		Timeout: time.Minute,
		Observer: observerFunc(func(_ context.Context, _ string, _ time.Duration, err error) {
			if err != nil {
				storeErrs++
			}
		})})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		store.hangUp = cancel
		d, err := l.Allow(ctx, "k")
		if !errors.Is(err, context.Canceled) || limiter.ErrorKind(err) != "canceled" {
			t.Fatalf("cancelled call %d: err %v (kind %q), want context.Canceled (kind canceled)", i, err, limiter.ErrorKind(err))
		}
		if d.Failure != limiter.FailureCanceled || d.Allowed {
			t.Fatalf("cancelled call %d: decision %+v, want a refusal with FailureCanceled, not a fail-open", i, d)
		}
	}
	if g.Breaker().State() != limiter.CircuitClosed || obs.list() != "" {
		t.Errorf("10 cancellations moved the breaker: state %s, transitions %q", g.Breaker().State(), obs.list())
	}
	if storeErrs != 0 {
		t.Errorf("the observer counted %d store errors for cancellations", storeErrs)
	}
}

// counter is a fixed InstanceCounter.
type counter int

func (c counter) InstanceCount() int { return int(c) }

func TestLocalDecisionsKeepTheGlobalBudget(t *testing.T) {
	lim := limiter.Limit{Algorithm: limiter.FixedWindow, Rate: 100, Period: time.Minute, AlignWindows: true}
	newLimiter := func(t *testing.T, clock *fakeClock, store *failingStore, instances int) *limiter.Limiter {
		t.Helper()
		g := limiter.NewGuard(limiter.GuardConfig{Store: "flaky", Local: limiter.LocalConfig{Instances: counter(instances), Now: clock.Now}})
		l, err := limiter.New(limiter.Config{Limit: lim, Store: store, FailPolicy: limiter.FailLocal, Guard: g})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	admit := func(l *limiter.Limiter, key string, n int) (admitted int, degraded bool) {
		for i := 0; i < n; i++ {
			d, _ := l.Allow(context.Background(), key)
			if d.Allowed {
				admitted++
			}
			degraded = d.Failure == limiter.FailureLocal
		}
		return admitted, degraded
	}
	tests := []struct {
		name                string
		instances           int
		spentBefore         int // admitted by the store before it fails
		wantLocal, wantTail int
	}{
		{"a fresh key gets the limit divided by two instances", 2, 0, 50, 0},
		{"a fresh key gets the limit divided by three instances, rounded down", 3, 0, 33, 0},
		{"a key that spent 60 of 100 keeps its share of the 40 left", 2, 60, 20, 0},
		{"a key already over its limit stays limited", 2, 100, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clock := newFakeClock()
			shared := limiter.NewMemoryStore(limiter.MemoryConfig{Now: clock.Now}) // "Redis"
			store := &failingStore{healthy: shared}
			l := newLimiter(t, clock, store, tc.instances)
			if got, _ := admit(l, "k", tc.spentBefore); got != tc.spentBefore {
				t.Fatalf("the store admitted %d of %d", got, tc.spentBefore)
			}
			clock.Advance(10 * time.Second)
			store.setErr(errStoreDown)
			got, degraded := admit(l, "k", 200)
			if got != tc.wantLocal || !degraded {
				t.Fatalf("while the store is down: admitted %d (degraded %v), want %d degraded", got, degraded, tc.wantLocal)
			}
			// The store comes back empty (restarted without persistence):
			// within the window the local share still holds.
			shared = limiter.NewMemoryStore(limiter.MemoryConfig{Now: clock.Now})
			store.healthy = shared
			store.setErr(nil)
			clock.Advance(10 * time.Second)
			if got, degraded := admit(l, "k", 200); got != tc.wantTail || degraded {
				t.Fatalf("after the store returned, in the same window: admitted %d more (degraded %v), want %d from the store", got, degraded, tc.wantTail)
			}
			// Next window: the store alone decides, with the whole limit.
			clock.Advance(time.Minute)
			if got, degraded := admit(l, "k", 200); got != 100 || degraded {
				t.Fatalf("next window: admitted %d (degraded %v), want 100 from the store", got, degraded)
			}
		})
	}
}

func TestShareDividesRateAndBurstAndNeverGoesBelowOne(t *testing.T) {
	tests := []struct {
		name string
		lim  limiter.Limit
		n    int
		want limiter.Limit
	}{
		{"one instance keeps the limit", limiter.PerMinute(limiter.FixedWindow, 100), 1, limiter.PerMinute(limiter.FixedWindow, 100)},
		{"three instances get a third each, rounded down", limiter.PerMinute(limiter.FixedWindow, 100), 3, limiter.PerMinute(limiter.FixedWindow, 33)},
		{"a bucket's burst is divided too", limiter.Limit{Algorithm: limiter.TokenBucket, Rate: 10, Burst: 40, Period: time.Second}, 4,
			limiter.Limit{Algorithm: limiter.TokenBucket, Rate: 2, Burst: 10, Period: time.Second}},
		{"a limit smaller than the count leaves one each", limiter.PerMinute(limiter.GCRA, 2), 5, limiter.PerMinute(limiter.GCRA, 1)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := limiter.Share(tc.lim, tc.n); got != tc.want {
				t.Fatalf("Share(%+v, %d) = %+v, want %+v", tc.lim, tc.n, got, tc.want)
			}
		})
	}
}

func TestAStoreThatStillAnswersSomeCallsDoesNotOpenTheCircuit(t *testing.T) {
	clock := newFakeClock()
	obs := &transitions{}
	b := limiter.NewGuard(limiter.GuardConfig{Store: "cluster", Breaker: limiter.BreakerConfig{
		Threshold: 5, MinFailing: 100 * time.Millisecond, Now: clock.Now, Observer: obs}})
	store := &failingStore{healthy: limiter.NewMemoryStore(limiter.MemoryConfig{Now: clock.Now})}
	l, err := limiter.New(limiter.Config{Limit: limiter.PerMinute(limiter.GCRA, 1_000_000), Store: store, Guard: b})
	if err != nil {
		t.Fatal(err)
	}
	// One master of three lost: runs of failures (up to 8 in a row, 1ms
	// apart) between answers, for two seconds.
	for i := 0; i < 2000; i++ {
		clock.Advance(time.Millisecond)
		if i%10 < 8 {
			store.setErr(errStoreDown)
		} else {
			store.setErr(nil)
		}
		_, _ = l.Allow(context.Background(), "k")
	}
	if got := obs.list(); got != "" {
		t.Fatalf("a store answering every tenth call opened the circuit: %s", got)
	}
	// Now it fails everything: the circuit opens once 100ms have passed.
	store.setErr(errStoreDown)
	for i := 0; i < 99; i++ {
		clock.Advance(time.Millisecond)
		_, _ = l.Allow(context.Background(), "k")
	}
	if s := b.Breaker().State(); s != limiter.CircuitClosed {
		t.Fatalf("state %s after 99ms of failures, want closed until 100ms", s)
	}
	clock.Advance(2 * time.Millisecond)
	_, _ = l.Allow(context.Background(), "k")
	if s := b.Breaker().State(); s != limiter.CircuitOpen {
		t.Fatalf("state %s after over 100ms of nothing but failures, want open", s)
	}
}

// nodeFailingStore is a sharded store whose every call fails on the node
// its key names ("node/rest"), with an error naming that node and the
// reason the key gives: "timeout" keys time out, the others are refused.
type nodeFailingStore struct{}

func (nodeFailingStore) Decide(_ context.Context, key string, _ limiter.Limit, _ int64) (limiter.Decision, error) {
	node, rest, _ := strings.Cut(key, "/")
	if strings.HasPrefix(rest, "timeout") {
		return limiter.Decision{}, fmt.Errorf("read tcp %s: i/o timeout: %w", node, context.DeadlineExceeded)
	}
	return limiter.Decision{}, fmt.Errorf("dial tcp %s: connection refused: %w", node, errStoreDown)
}

func (nodeFailingStore) Name() string { return "redis" }

func (nodeFailingStore) Shard(key string) string {
	node, _, _ := strings.Cut(key, "/")
	return node
}

// summaries are the "rate limit store failing" lines of a text log.
func summaries(log string) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(log), "\n") {
		if strings.Contains(l, `msg="rate limit store failing"`) {
			out = append(out, l)
		}
	}
	return out
}

func TestAFailureSummaryIsLoggedByTheEndOfItsIntervalWithoutAnotherFailure(t *testing.T) {
	clock := newFakeClock()
	var logs syncBuffer
	g := limiter.NewGuard(limiter.GuardConfig{
		Store: "redis", LogInterval: 10 * time.Second, AfterFunc: clock.AfterFunc,
		Breaker: limiter.BreakerConfig{Now: clock.Now},
		Logger:  slog.New(slog.NewTextHandler(&logs, nil)),
	})
	defer g.Close()
	l, err := limiter.New(limiter.Config{Limit: limiter.PerMinute(limiter.GCRA, 10), Store: nodeFailingStore{}, Guard: g})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 244; i++ {
		if _, err := l.Allow(context.Background(), fmt.Sprintf("10.0.0.1:6379/k%d", i)); err == nil {
			t.Fatal("the store is down but the decision has no error")
		}
	}
	if got := summaries(logs.String()); len(got) != 1 || !strings.Contains(got[0], "failures=1 ") {
		t.Fatalf("at once: %d lines, want the first failure alone:\n%s", len(got), logs.String())
	}
	clock.Advance(10*time.Second - time.Millisecond)
	if got := summaries(logs.String()); len(got) != 1 {
		t.Fatalf("before the interval ended %d lines, want 1:\n%s", len(got), logs.String())
	}
	clock.Advance(time.Millisecond)
	got := summaries(logs.String())
	if len(got) != 2 {
		t.Fatalf("at the end of the interval, with no failure since, %d lines, want 2 (the summary of the other 243):\n%s", len(got), logs.String())
	}
	for _, want := range []string{"failures=243 ", "node=10.0.0.1:6379", "over=10s", `last_error="redis store: dial tcp 10.0.0.1:6379: connection refused`} {
		if !strings.Contains(got[1], want) {
			t.Errorf("summary lacks %s:\n%s", want, got[1])
		}
	}
	if n := clock.Armed(); n != 0 {
		t.Errorf("%d timers still armed after the summary, want 0", n)
	}
}

func TestInterleavedFailuresOfTwoReasonsAndNodesAreSummarisedEachWithItsOwnLastError(t *testing.T) {
	clock := newFakeClock()
	var logs syncBuffer
	g := limiter.NewGuard(limiter.GuardConfig{
		Store: "redis", LogInterval: 10 * time.Second, AfterFunc: clock.AfterFunc,
		Breaker: limiter.BreakerConfig{Now: clock.Now},
		Logger:  slog.New(slog.NewTextHandler(&logs, nil)),
	})
	l, err := limiter.New(limiter.Config{Limit: limiter.PerMinute(limiter.GCRA, 10), Store: nodeFailingStore{}, Guard: g})
	if err != nil {
		t.Fatal(err)
	}
	// A dead master refuses, another times out, turn about.
	for i := 0; i < 100; i++ {
		key := "10.0.0.1:6379/k"
		if i%2 == 1 {
			key = "10.0.0.2:6379/timeout"
		}
		_, _ = l.Allow(context.Background(), key)
	}
	clock.Advance(10 * time.Second)
	got := summaries(logs.String())
	if len(got) != 4 {
		t.Fatalf("%d lines, want 4 (each node's first failure, then its summary):\n%s", len(got), logs.String())
	}
	for _, line := range got[2:] {
		switch {
		case strings.Contains(line, "node=10.0.0.1:6379"):
			if !strings.Contains(line, "reason=error") || !strings.Contains(line, "failures=49 ") ||
				!strings.Contains(line, "dial tcp 10.0.0.1:6379") || strings.Contains(line, "10.0.0.2") {
				t.Errorf("the refused node's summary carries another's failures:\n%s", line)
			}
		case strings.Contains(line, "node=10.0.0.2:6379"):
			if !strings.Contains(line, "reason=timeout") || !strings.Contains(line, "failures=49 ") ||
				!strings.Contains(line, "read tcp 10.0.0.2:6379") || strings.Contains(line, "10.0.0.1") {
				t.Errorf("the timing-out node's summary carries another's failures:\n%s", line)
			}
		default:
			t.Errorf("summary names no node:\n%s", line)
		}
	}
	// Close logs what is pending and leaves no timer.
	_, _ = l.Allow(context.Background(), "10.0.0.1:6379/k")
	g.Close()
	if got := summaries(logs.String()); len(got) != 5 || !strings.Contains(got[4], "failures=1 ") {
		t.Errorf("Close did not log the pending failure:\n%s", logs.String())
	}
	if n := clock.Armed(); n != 0 {
		t.Errorf("%d timers armed after Close, want 0", n)
	}
}

// circuitSet records what a CircuitSetObserver is told, in order.
type circuitSet struct{ transitions }

func (c *circuitSet) CircuitAdded(store string, state limiter.CircuitState) {
	c.mu.Lock()
	c.seen = append(c.seen, fmt.Sprintf("+%s:%s", store, state))
	c.mu.Unlock()
}

func (c *circuitSet) CircuitRemoved(store string) {
	c.mu.Lock()
	c.seen = append(c.seen, "-"+store)
	c.mu.Unlock()
}

func TestABreakerOfAShardThatLeftTheStoreIsDroppedAndReportsNoMore(t *testing.T) {
	clock := newFakeClock()
	obs := &circuitSet{}
	g := limiter.NewGuard(limiter.GuardConfig{
		Store:   "redis",
		Breaker: limiter.BreakerConfig{Threshold: 2, Cooldown: time.Second, Now: clock.Now, Observer: obs},
	})
	l, err := limiter.New(limiter.Config{Limit: limiter.PerMinute(limiter.GCRA, 10), Store: nodeFailingStore{}, Guard: g})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		_, _ = l.Allow(context.Background(), "a:1/k")
	}
	g.SetShards([]string{"b:2", "c:3"})
	for range 2 {
		_, _ = l.Allow(context.Background(), "b:2/k")
	}
	seen := strings.Fields(obs.list())
	if len(seen) != 6 || strings.Join(seen[:3], " ") != "+redis/a:1:closed redis/a:1:closed->open -redis/a:1" ||
		!slices.Contains(seen[3:5], "+redis/b:2:closed") || !slices.Contains(seen[3:5], "+redis/c:3:closed") ||
		seen[5] != "redis/b:2:closed->open" {
		t.Errorf("told %q, want a:1 made, opened and dropped, then b:2 and c:3 made closed, then b:2 opened", obs.list())
	}
	shards := g.Shards()
	slices.Sort(shards)
	if got := strings.Join(shards, " "); got != "b:2 c:3" {
		t.Errorf("shards %q, want b:2 c:3", got)
	}
}

// movingStore is a sharded store of one key range whose owner dies: calls
// to "dead" fail, and once a new owner is elected the store's shard map
// names it only after RefreshShards asks.
type movingStore struct {
	elected   atomic.Bool // the cluster promoted "promoted"
	refreshed atomic.Bool // the store's map knows it
	asks      atomic.Int64
}

func (s *movingStore) Decide(_ context.Context, key string, _ limiter.Limit, _ int64) (limiter.Decision, error) {
	if s.Shard(key) == "dead" {
		return limiter.Decision{}, fmt.Errorf("dial tcp dead: connection refused: %w", errStoreDown)
	}
	return limiter.Decision{Allowed: true, Limit: 10, Remaining: 9}, nil
}

func (s *movingStore) Name() string { return "redis" }

func (s *movingStore) Shard(string) string {
	if s.refreshed.Load() {
		return "promoted"
	}
	return "dead"
}

func (s *movingStore) RefreshShards() {
	s.asks.Add(1)
	if s.elected.Load() {
		s.refreshed.Store(true)
	}
}

// A shard's open circuit asks the store for its shard map itself (no
// decision reaches the store to learn of it otherwise), so that once a
// new owner is elected its keys route to the new owner's closed breaker
// at once, not after the dead one's cooldown.
func TestAnOpenShardCircuitAsksForTheShardMapAndFollowsItsNewOwner(t *testing.T) {
	clock := newFakeClock()
	g := limiter.NewGuard(limiter.GuardConfig{
		Store:   "redis",
		Breaker: limiter.BreakerConfig{Threshold: 2, Cooldown: time.Hour, Now: clock.Now},
	})
	defer g.Close()
	st := &movingStore{}
	l, err := limiter.New(limiter.Config{Limit: limiter.PerMinute(limiter.GCRA, 10), Store: st, Guard: g, FailPolicy: limiter.FailClosed})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for range 2 {
		_, _ = l.Allow(ctx, "k")
	}
	if _, err := l.Allow(ctx, "k"); !errors.Is(err, limiter.ErrCircuitOpen) {
		t.Fatalf("after two failures: %v, want the circuit open", err)
	}
	if st.asks.Load() == 0 {
		t.Fatal("the open circuit did not ask for the shard map")
	}
	st.elected.Store(true)
	var d limiter.Decision
	for range 3 {
		if d, err = l.Allow(ctx, "k"); err == nil {
			break
		}
	}
	if err != nil || !d.Allowed {
		t.Fatalf("after the new owner's election, with the dead one's cooldown not over: %+v, %v", d, err)
	}
}
