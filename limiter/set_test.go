package limiter_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

func newSet(t *testing.T, st limiter.Store, policies []limiter.FailPolicy, lims ...limiter.Limit) *limiter.Set {
	t.Helper()
	ls := make([]*limiter.Limiter, len(lims))
	for i, lim := range lims {
		cfg := limiter.Config{Limit: lim, Store: st}
		if policies != nil {
			cfg.FailPolicy = policies[i]
		}
		l, err := limiter.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ls[i] = l
	}
	s, err := limiter.NewSet(ls...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSetRefusedByOnePartTakesFromNone(t *testing.T) {
	st := limiter.NewMemoryStore(limiter.MemoryConfig{})
	s := newSet(t, st, nil,
		limiter.PerMinute(limiter.SlidingWindow, 10),
		limiter.Limit{Algorithm: limiter.TokenBucket, Rate: 1000, Period: time.Hour},
		limiter.Limit{Algorithm: limiter.FixedWindow, Rate: 3, Period: time.Hour})
	ctx := context.Background()
	keys := []string{"user:1", "user:1", "org:1"}
	for i := 0; i < 3; i++ {
		if _, ok, err := s.AllowN(ctx, keys, []int64{1, 100, 1}); !ok || err != nil {
			t.Fatalf("request %d: refused, %v", i, err)
		}
	}
	out, ok, err := s.AllowN(ctx, keys, []int64{1, 100, 1})
	if ok || err != nil {
		t.Fatalf("request 4 over the quota of 3 admitted: %+v, %v", out, err)
	}
	if !out[0].Allowed || out[0].Remaining != 7 || out[0].Admitted != 0 {
		t.Fatalf("part 0 would admit and took nothing: %+v", out[0])
	}
	if !out[1].Allowed || out[1].Remaining != 700 || out[1].Admitted != 0 {
		t.Fatalf("part 1 would admit and took nothing: %+v", out[1])
	}
	if out[2].Allowed || out[2].RetryAfter <= 0 {
		t.Fatalf("part 2 refuses with a retry-after: %+v", out[2])
	}
	peek, ok, err := s.PeekN(ctx, keys, []int64{1, 100, 1})
	if ok || err != nil || peek[0].Remaining != 7 || peek[1].Remaining != 700 {
		t.Fatalf("peek after the refusal: %v %+v, %v", ok, peek, err)
	}
	// A fresh org key: the set admits again, taking from every part.
	keys[2] = "org:2"
	out, ok, err = s.AllowN(ctx, keys, []int64{1, 100, 1})
	if !ok || err != nil || out[0].Remaining != 6 || out[1].Remaining != 600 || out[2].Remaining != 2 || out[1].Admitted != 100 {
		t.Fatalf("admitted set: %v %+v, %v", ok, out, err)
	}
}

func TestSetPeekTakesNothingAndCreatesNoKey(t *testing.T) {
	st := limiter.NewMemoryStore(limiter.MemoryConfig{})
	s := newSet(t, st, nil, limiter.PerMinute(limiter.GCRA, 5), limiter.PerMinute(limiter.SlidingLog, 5))
	for i := 0; i < 3; i++ {
		out, ok, err := s.PeekN(context.Background(), []string{"a", "b"}, []int64{2, 3})
		if !ok || err != nil || out[0].Remaining != 5 || out[1].Remaining != 5 || out[0].Admitted != 0 {
			t.Fatalf("peek %d: %v %+v, %v", i, ok, out, err)
		}
	}
	if n := st.Len(); n != 0 {
		t.Fatalf("peeks created %d keys", n)
	}
}

func TestSetRefusesWhatItCannotDecide(t *testing.T) {
	mem := limiter.NewMemoryStore(limiter.MemoryConfig{})
	lim := limiter.PerMinute(limiter.FixedWindow, 5)
	a, _ := limiter.New(limiter.Config{Limit: lim, Store: mem})
	b, _ := limiter.New(limiter.Config{Limit: lim, Store: limiter.NewMemoryStore(limiter.MemoryConfig{})})
	if _, err := limiter.NewSet(a, b); err == nil {
		t.Fatal("a set over two stores made")
	}
	plain, _ := limiter.New(limiter.Config{Limit: lim, Store: &failingStore{healthy: mem}})
	if _, err := limiter.NewSet(plain); err == nil {
		t.Fatal("a set on a store that is no SetStore made")
	}
	s, err := limiter.NewSet(a, a)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]limiter.Decision, 2)
	if _, err := s.Decide(context.Background(), limiter.ModeConsume, []string{"k", "k"}, nil, out); !errors.Is(err, limiter.ErrSharedState) {
		t.Fatalf("two parts of one state: %v, want ErrSharedState", err)
	}
	if _, err := s.Decide(context.Background(), limiter.ModeConsume, []string{"k", "j"}, []int64{1, 6}, out); !errors.Is(err, limiter.ErrCostExceedsLimit) {
		t.Fatalf("a cost over one part's quota: %v", err)
	}
	if _, err := s.Decide(context.Background(), limiter.ModeAtMost, []string{"k", "j"}, nil, out); !errors.Is(err, limiter.ErrNotSupported) {
		t.Fatalf("at-most on a set: %v", err)
	}
	if n := mem.Len(); n != 0 {
		t.Fatalf("refused calls created %d keys", n)
	}
}

// failingSetStore is a MemoryStore whose set decisions fail while err is set.
type failingSetStore struct {
	*limiter.MemoryStore
	failing atomic.Bool
}

func (f *failingSetStore) DecideSet(ctx context.Context, parts []limiter.Part, mode limiter.Mode, timeout time.Duration, out []limiter.Decision) (bool, error) {
	if f.failing.Load() {
		return false, errors.New("store down")
	}
	return f.MemoryStore.DecideSet(ctx, parts, mode, timeout, out)
}

func TestSetFollowsEachPartsFailPolicy(t *testing.T) {
	st := &failingSetStore{MemoryStore: limiter.NewMemoryStore(limiter.MemoryConfig{})}
	lim := limiter.Limit{Algorithm: limiter.FixedWindow, Rate: 2, Period: time.Hour}
	ctx := context.Background()
	st.failing.Store(true)

	open := newSet(t, st, []limiter.FailPolicy{limiter.FailOpen, limiter.FailOpen}, lim, lim)
	out, ok, err := open.AllowN(ctx, []string{"a", "b"}, nil)
	if !ok || err == nil || out[0].Failure != limiter.FailureOpen || out[1].Admitted != 1 {
		t.Fatalf("open, open: %v %+v, %v", ok, out, err)
	}
	mixed := newSet(t, st, []limiter.FailPolicy{limiter.FailOpen, limiter.FailClosed}, lim, lim)
	out, ok, err = mixed.AllowN(ctx, []string{"a", "b"}, nil)
	if ok || err == nil || out[0].Failure != limiter.FailureOpen || out[1].Failure != limiter.FailureClosed || out[0].Admitted != 0 {
		t.Fatalf("open, closed: %v %+v, %v", ok, out, err)
	}
	// Local and closed: refused, the local share untouched.
	local := newSet(t, st, []limiter.FailPolicy{limiter.FailLocal, limiter.FailClosed}, lim, lim)
	for i := 0; i < 3; i++ {
		if out, ok, _ = local.AllowN(ctx, []string{"a", "b"}, nil); ok || out[0].Failure != limiter.FailureLocal || !out[0].Allowed || out[0].Remaining != 2 {
			t.Fatalf("local, closed %d: %v %+v", i, ok, out)
		}
	}
	// Local and open: the local share admits its quota, then refuses.
	localOpen := newSet(t, st, []limiter.FailPolicy{limiter.FailLocal, limiter.FailOpen}, lim, lim)
	for i, want := range []bool{true, true, false} {
		if out, ok, _ = localOpen.AllowN(ctx, []string{"a", "b"}, nil); ok != want {
			t.Fatalf("local, open %d: %v %+v, want %v", i, ok, out, want)
		}
	}
	st.failing.Store(false)
	if out, ok, err = mixed.AllowN(ctx, []string{"a", "b"}, nil); !ok || err != nil || out[0].Remaining != 1 {
		t.Fatalf("store back: %v %+v, %v", ok, out, err)
	}
}

func TestSetOnMemoryIsExactUnderContention(t *testing.T) {
	st := limiter.NewMemoryStore(limiter.MemoryConfig{Shards: 4})
	// Shards: 4, so that parts share shards and sets lock several.
	s := newSet(t, st, nil,
		limiter.Limit{Algorithm: limiter.FixedWindow, Rate: 50, Period: time.Hour},
		limiter.Limit{Algorithm: limiter.TokenBucket, Rate: 1, Period: time.Hour, Burst: 300},
		limiter.Limit{Algorithm: limiter.SlidingLog, Rate: 80, Period: time.Hour})
	var admitted [3]atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 64; g++ {
		wg.Go(func() {
			for i := 0; i < 20; i++ {
				keys := []string{"u" + string(rune('a'+g%3)), "t" + string(rune('a'+g%2)), "org"}
				costs := []int64{1, int64(1 + i%7), 1}
				out, ok, err := s.AllowN(context.Background(), keys, costs)
				if err != nil {
					t.Error(err)
					return
				}
				if ok {
					for p := range out {
						admitted[p].Add(out[p].Admitted)
					}
				}
			}
		})
	}
	wg.Wait()
	peek, _, _ := s.PeekN(context.Background(), []string{"ua", "ta", "org"}, nil)
	if got := admitted[2].Load(); got > 80 || 80-got != peek[2].Remaining {
		t.Fatalf("org admitted %d of 80, remaining %d", got, peek[2].Remaining)
	}
	if admitted[0].Load() > 150 || admitted[1].Load() > 600 {
		t.Fatalf("admitted %d, %d", admitted[0].Load(), admitted[1].Load())
	}
}
