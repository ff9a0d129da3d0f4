package rls

import (
	"slices"
	"testing"

	"github.com/rl-exporter/rl-exporter/limiter"
)

func newLimiters(t *testing.T, store limiter.Store, n int) []*limiter.Limiter {
	t.Helper()
	out := make([]*limiter.Limiter, n)
	for i := range out {
		l, err := limiter.New(limiter.Config{Store: store, Limit: limiter.PerMinute(limiter.FixedWindow, int64(i+1))})
		if err != nil {
			t.Fatal(err)
		}
		out[i] = l
	}
	return out
}

// A setCache builds the Set of a combination of limiters once and answers it after: another
// order or another combination is another Set, one that could not be built is no Set kept, one
// of more parts than a key holds is built each time, and a full cache builds without keeping.
// The Set kept is its own: the caller's slice, changed, changes nothing in it.
func TestASetIsBuiltOncePerCombinationOfLimiters(t *testing.T) {
	store := limiter.NewMemoryStore(limiter.MemoryConfig{})
	l := newLimiters(t, store, maxCachedSetParts+1)
	var sc setCache
	of := func(lims ...*limiter.Limiter) *limiter.Set {
		t.Helper()
		s, err := sc.of(lims)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	ab := of(l[0], l[1])
	if again := of(l[0], l[1]); again != ab {
		t.Error("the same combination again: another Set, want the one kept")
	}
	if ba := of(l[1], l[0]); ba == ab {
		t.Error("the combination in another order: the Set of the first order")
	}
	if a := of(l[0]); a == ab {
		t.Error("a combination of one of its limiters: the Set of two")
	}
	lims := []*limiter.Limiter{l[2], l[3]}
	cd, _ := sc.of(lims)
	lims[1] = l[4]
	if got := cd.Limiters(); !slices.Equal(got, []*limiter.Limiter{l[2], l[3]}) {
		t.Errorf("the kept Set's limiters after the caller's slice changed: %v, want the two it was built of", got)
	}
	if again := of(l[2], l[3]); again != cd {
		t.Error("the combination whose slice the caller changed: another Set, want the one kept")
	}

	other := newLimiters(t, limiter.NewMemoryStore(limiter.MemoryConfig{}), 1)[0]
	for range 2 {
		if _, err := sc.of([]*limiter.Limiter{l[0], other}); err == nil {
			t.Fatal("limiters on two stores: a Set, want the error")
		}
	}
	if all := of(l...); of(l...) == all {
		t.Errorf("%d limiters, past the %d a key holds: the Set kept, want one built each time", len(l), maxCachedSetParts)
	}
	kept := len(*sc.sets.Load())
	for _, x := range newLimiters(t, store, maxCachedSets-kept) {
		of(x)
	}
	if n := len(*sc.sets.Load()); n != maxCachedSets {
		t.Fatalf("%d Sets kept, want the cache full at %d", n, maxCachedSets)
	}
	past := newLimiters(t, store, 1)[0]
	if of(past) == of(past) {
		t.Error("a combination past a full cache: kept, want one built each time")
	}
	if n := len(*sc.sets.Load()); n != maxCachedSets {
		t.Errorf("%d Sets kept past a full cache, want %d", n, maxCachedSets)
	}
	if again := of(l[0], l[1]); again != ab {
		t.Error("a combination kept before the cache filled: another Set, want the one kept")
	}
}
