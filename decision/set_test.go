package decision

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

func setOf(t *testing.T, store limiter.Store, lims ...limiter.Limit) *limiter.Set {
	t.Helper()
	var ls []*limiter.Limiter
	for _, lim := range lims {
		l, err := limiter.New(limiter.Config{Store: store, Limit: lim})
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
	}
	s, err := limiter.NewSet(ls...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestDecideASetSpeaksForTheLowestShareAndNamesItsRefusers(t *testing.T) {
	ctx := context.Background()
	store := limiter.NewMemoryStore(limiter.MemoryConfig{})
	set := setOf(t, store, limiter.PerMinute(limiter.FixedWindow, 5), limiter.PerMinute(limiter.TokenBucket, 100),
		limiter.Limit{Algorithm: limiter.FixedWindow, Rate: 300, Period: time.Hour})
	ask := func(cost int64, mode limiter.Mode) Outcome {
		return Decide(ctx, Ask{Mode: mode, Set: &SetAsk{Set: set, Parts: []SetPart{
			{Name: "rpm", Key: "k|rpm", Cost: 1}, {Name: "tpm", Key: "k|tpm", Cost: cost}, {Name: "hourly", Key: "org|hourly", Cost: cost}}}})
	}
	o := ask(60, limiter.ModeConsume)
	if o.Verdict != VerdictAllowed || o.Decision.Remaining != 40 || o.Limit.Algorithm != limiter.TokenBucket {
		t.Fatalf("first: %v %+v on %v: want allowed, tpm's 40 left", o.Verdict, o.Decision, o.Limit)
	}
	o = ask(60, limiter.ModeConsume)
	if o.Verdict != VerdictRejected || !slices.Equal(o.RefusedBy, []string{"tpm"}) {
		t.Fatalf("second: %v refused by %v: want rejected by tpm", o.Verdict, o.RefusedBy)
	}
	p := ask(1, limiter.ModePeek)
	if p.Parts[0].Decision.Remaining != 4 || p.Parts[2].Decision.Remaining != 240 {
		t.Errorf("after a refusal by tpm: rpm %d hourly %d left, want 4 and 240 (nothing taken)",
			p.Parts[0].Decision.Remaining, p.Parts[2].Decision.Remaining)
	}
	// A cost over a window refuses without deciding, naming the limits it exceeds.
	o = ask(200, limiter.ModeConsume)
	if o.Verdict != VerdictRejected || !slices.Equal(o.RefusedBy, []string{"tpm"}) || o.Err == nil {
		t.Errorf("cost 200: %v %v %v, want rejected by tpm with the cost's error", o.Verdict, o.RefusedBy, o.Err)
	}
}

func TestDecideASetsShadowPartRefusesNothing(t *testing.T) {
	ctx := context.Background()
	store := limiter.NewMemoryStore(limiter.MemoryConfig{})
	enforced := setOf(t, store, limiter.PerMinute(limiter.FixedWindow, 5))
	shadow := setOf(t, store, limiter.PerMinute(limiter.FixedWindow, 1))
	a := Ask{Set: &SetAsk{Set: enforced, Parts: []SetPart{{Name: "rpm", Key: "k", Cost: 1}},
		ShadowSet: shadow, ShadowParts: []SetPart{{Name: "trial", Key: "k|trial", Cost: 1}}}}
	if o := Decide(ctx, a); o.Verdict != VerdictAllowed {
		t.Fatalf("first: %v", o.Verdict)
	}
	o := Decide(ctx, a)
	if o.Verdict != VerdictShadowLimitOver || o.Verdict.Refuses() || o.Status() != limiter.StatusShadowRejected {
		t.Fatalf("second: %v, want shadow over, passing", o.Verdict)
	}
	if o.Decision.Remaining != 3 || len(o.Parts) != 2 || !o.Parts[1].Shadow || o.Parts[1].Decision.Allowed {
		t.Errorf("second: %+v parts %+v: want rpm's 3 left, and the shadow part's refusal", o.Decision, o.Parts)
	}
}
