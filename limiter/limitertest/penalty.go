package limitertest

import (
	"context"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/eventually"
	"github.com/rl-exporter/rl-exporter/limiter"
)

// RunPenalties is the penalty box's conformance suite, on the store's own
// clock: three strikes box a key for exactly For, a strike in the box does
// not lengthen it, Lift empties it, and the box opens when For is over.
func RunPenalties(t *testing.T, ps limiter.PenaltyStore) {
	t.Helper()
	b := &box{ps: ps, p: limiter.Penalty{After: 3, Within: time.Minute, For: 400 * time.Millisecond}}
	run := uniqueRun()
	t.Run("the third strike boxes the key for exactly For", func(t *testing.T) { b.trip(t, run+":trip") })
	t.Run("the box opens once For is over", func(t *testing.T) { b.opens(t, run+":open") })
	t.Run("Lift empties the box and forgets the strikes", func(t *testing.T) { b.lift(t, run+":lift", run+":never") })
	t.Run("keys are apart", func(t *testing.T) {
		for range 3 {
			b.strike(t, run+":a")
		}
		if d := b.penalized(t, run+":b"); d != 0 {
			t.Errorf("b penalized for %s by a's strikes", d)
		}
	})
}

// box is a PenaltyStore under test with its Penalty.
type box struct {
	ps limiter.PenaltyStore
	p  limiter.Penalty
}

func (b *box) strike(t *testing.T, key string) time.Duration {
	t.Helper()
	d, err := b.ps.Strike(context.Background(), key, b.p, 0)
	if err != nil {
		t.Fatalf("Strike %s: %v", key, err)
	}
	return d
}

func (b *box) penalized(t *testing.T, key string) time.Duration {
	t.Helper()
	d, err := b.ps.Penalized(context.Background(), key, 0)
	if err != nil {
		t.Fatalf("Penalized %s: %v", key, err)
	}
	return d
}

func (b *box) trip(t *testing.T, key string) {
	p, strike, penalized := b.p, b.strike, b.penalized
	for i := 1; i <= 2; i++ {
		if d := strike(t, key); d != 0 {
			t.Fatalf("strike %d boxed the key for %s, want 0 before the third", i, d)
		}
		if d := penalized(t, key); d != 0 {
			t.Fatalf("after strike %d: penalized for %s, want not at all", i, d)
		}
	}
	if d := strike(t, key); d != p.For {
		t.Fatalf("third strike: %s, want exactly %s", d, p.For)
	}
	left := penalized(t, key)
	if left <= 0 || left > p.For {
		t.Fatalf("after the third strike: penalized for %s, want (0, %s]", left, p.For)
	}
	if d := strike(t, key); d != 0 {
		t.Errorf("a strike in the box: %s, want 0", d)
	}
	if later := penalized(t, key); later > left {
		t.Errorf("a strike in the box lengthened it from %s to %s", left, later)
	}
}

func (b *box) opens(t *testing.T, key string) {
	p, strike, penalized := b.p, b.strike, b.penalized
	var tripped time.Time
	for range 3 {
		tripped = time.Now()
		strike(t, key)
	}
	if !eventually.Within(p.For+2*time.Second, func() bool { return penalized(t, key) == 0 }) {
		t.Fatalf("still penalized %s after tripping", time.Since(tripped))
	}
	// The store's clock may run apart from ours by a millisecond's rounding.
	if open := time.Since(tripped); open < p.For-time.Millisecond {
		t.Errorf("the box opened %s after tripping, before For (%s)", open, p.For)
	}
	if d := strike(t, key); d != 0 {
		t.Errorf("a strike after the box opened: %s, want 0 (the strikes start again)", d)
	}
}

func (b *box) lift(t *testing.T, key, never string) {
	strike, penalized := b.strike, b.penalized
	ctx := context.Background()
	for range 3 {
		strike(t, key)
	}
	if err := b.ps.Lift(ctx, key, 0); err != nil {
		t.Fatalf("Lift: %v", err)
	}
	if d := penalized(t, key); d != 0 {
		t.Fatalf("after Lift: penalized for %s", d)
	}
	strike(t, key)
	if d := strike(t, key); d != 0 {
		t.Errorf("two strikes after Lift boxed the key: the old strikes were kept")
	}
	if err := b.ps.Lift(ctx, never, 0); err != nil {
		t.Errorf("Lift of a key never struck: %v", err)
	}
}
