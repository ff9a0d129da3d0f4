package limiter_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

func openReservations(t *testing.T, l *limiter.Limiter, key string) int64 {
	t.Helper()
	n, err := l.OpenReservations(context.Background(), key)
	if err != nil {
		t.Fatalf("OpenReservations(%q): %v", key, err)
	}
	return n
}

// A key's open reservations are those neither settled nor past their hold; counting them
// changes nothing, not even by creating a key.
func TestOpenReservationsCountsWhatIsNeitherSettledNorPastItsHold(t *testing.T) {
	ctx := context.Background()
	for _, a := range limiter.AllAlgorithms() {
		t.Run(string(a), func(t *testing.T) {
			clk := newFakeClock()
			store := limiter.NewMemoryStore(limiter.MemoryConfig{Now: clk.Now})
			l, err := limiter.New(limiter.Config{Limit: reserveLimit(a), Store: store, Hold: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			if n := openReservations(t, l, "k"); n != 0 || store.Len() != 0 {
				t.Fatalf("a fresh key: %d open, %d keys held; want 0 and no key created", n, store.Len())
			}
			first := reserve(t, l, "k", 30)
			clk.Advance(30 * time.Second)
			reserve(t, l, "k", 20)
			if n := openReservations(t, l, "k"); n != 2 {
				t.Fatalf("after two reservations: %d open, want 2", n)
			}
			if _, err := l.Commit(ctx, first, 10); err != nil {
				t.Fatal(err)
			}
			if n := openReservations(t, l, "k"); n != 1 {
				t.Fatalf("after committing one: %d open, want 1", n)
			}
			if n := openReservations(t, l, "other"); n != 0 {
				t.Fatalf("another key: %d open, want 0", n)
			}
			left := remaining(t, l, "k")
			clk.Advance(time.Minute) // the second's hold is over
			if n := openReservations(t, l, "k"); n != 0 {
				t.Fatalf("past the hold: %d open, want 0", n)
			}
			for range 3 {
				openReservations(t, l, "k")
			}
			if got := remaining(t, l, "k"); got != left {
				t.Fatalf("remaining %d after counting, %d before: counting changed the budget", got, left)
			}
		})
	}
}

func TestOpenReservationsOnAStoreThatKeepsNoCount(t *testing.T) {
	mem := limiter.NewMemoryStore(limiter.MemoryConfig{})
	for _, st := range []limiter.Store{plainOnly{mem}, failingReserver{&failingStore{healthy: mem}, mem}} {
		l, err := limiter.New(limiter.Config{Limit: reserveLimit(limiter.FixedWindow), Store: st})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.OpenReservations(context.Background(), "k"); !errors.Is(err, limiter.ErrOpenReservationsNotSupported) {
			t.Errorf("%T: %v, want ErrOpenReservationsNotSupported", st, err)
		}
	}
}

// failingCounter is a failingReserver that counts open reservations.
type failingCounter struct{ failingReserver }

func (f failingCounter) OpenReservations(ctx context.Context, key string, lim limiter.Limit, timeout time.Duration) (int64, error) {
	if err := f.failing(); err != nil {
		return 0, err
	}
	return f.healthy.OpenReservations(ctx, key, lim, timeout)
}

// A count goes through the breaker as Reset does: a failure is returned, no fail policy answers.
func TestOpenReservationsFailsWithTheStoreAndSkipsItWhileTheBreakerIsOpen(t *testing.T) {
	ctx := context.Background()
	mem := limiter.NewMemoryStore(limiter.MemoryConfig{})
	store := failingCounter{failingReserver{&failingStore{healthy: mem}, mem}}
	l, err := limiter.New(limiter.Config{Limit: reserveLimit(limiter.GCRA), Store: store, FailPolicy: limiter.FailOpen,
		Breaker: limiter.BreakerConfig{Threshold: 2, Cooldown: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	reserve(t, l, "k", 5)
	if n := openReservations(t, l, "k"); n != 1 {
		t.Fatalf("%d open, want 1", n)
	}
	store.setErr(errStoreDown)
	for i := range 2 {
		if _, err := l.OpenReservations(ctx, "k"); !errors.Is(err, errStoreDown) {
			t.Fatalf("count %d with the store down: %v, want the store's error", i, err)
		}
	}
	before := store.calls.Load()
	if _, err := l.OpenReservations(ctx, "k"); !errors.Is(err, limiter.ErrCircuitOpen) || store.calls.Load() != before {
		t.Fatalf("count with the breaker open: %v after %d calls; want ErrCircuitOpen without a call", err, store.calls.Load()-before)
	}
}
