package region_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/limitertest"
	"github.com/rl-exporter/rl-exporter/region"
)

func TestReservationsInLocalAndStrictModes(t *testing.T) {
	w := newWorld(t, worldConfig{regions: []string{"eu", "us"}, oneWay: 2 * time.Millisecond})
	for _, m := range []region.Mode{region.ModeLocal, region.ModeStrict} {
		t.Run(string(m), func(t *testing.T) {
			st, err := w.sets["eu"].Store(m, region.StoreOptions{})
			if err != nil {
				t.Fatal(err)
			}
			limitertest.RunReservations(t, func(*testing.T) limiter.Store { return st })
		})
	}
}

// A reservation taken in one region is settled from the other: strict
// mode keeps it, with the state, on the key's home region.
func TestStrictReservationSettlesFromAnyRegion(t *testing.T) {
	w := newWorld(t, worldConfig{regions: []string{"eu", "us"}, oneWay: 2 * time.Millisecond})
	ctx := context.Background()
	lim := limiter.Limit{Algorithm: limiter.TokenBucket, Rate: 100, Period: 24 * time.Hour}
	ls := w.limiters(t, region.ModeStrict, region.StoreOptions{}, lim)
	for _, l := range ls {
		if !l.Reserves() {
			t.Fatal("a strict-mode Limiter does not reserve")
		}
	}
	key := "strict-reservation"
	r, d, err := ls["eu"].Reserve(ctx, key, 60)
	if err != nil || !d.Allowed || r.ID == "" {
		t.Fatalf("Reserve in eu = %+v, %+v, %v", r, d, err)
	}
	if d, err := ls["us"].AllowN(ctx, key, 41); err != nil || d.Allowed {
		t.Fatalf("AllowN(41) in us with 60 of 100 reserved in eu = %+v, %v; want a rejection", d, err)
	}
	if st, err := ls["us"].Commit(ctx, r, 20); err != nil || st.Refunded != 40 {
		t.Fatalf("Commit in us = %+v, %v; want 40 refunded", st, err)
	}
	if _, err := ls["eu"].Commit(ctx, r, 20); !errors.Is(err, limiter.ErrReservationUnknown) {
		t.Fatalf("Commit again in eu: %v, want ErrReservationUnknown", err)
	}
	if d, err := ls["eu"].PeekN(ctx, key, 80); err != nil || !d.Allowed {
		t.Fatalf("PeekN(80) after the commit = %+v, %v; want 80 left", d, err)
	}
}

func TestAsyncAndHybridRefuseReservations(t *testing.T) {
	w := newWorld(t, worldConfig{regions: []string{"eu", "us"}})
	lim := limiter.Limit{Algorithm: limiter.FixedWindow, Rate: 10, Period: time.Minute}
	for _, m := range []region.Mode{region.ModeAsync, region.ModeHybrid} {
		l := w.limiters(t, m, region.StoreOptions{}, lim)["eu"]
		if l.Reserves() {
			t.Fatalf("%s: Reserves() = true", m)
		}
		if _, _, err := l.Reserve(context.Background(), "k", 1); !errors.Is(err, limiter.ErrReservationsNotSupported) {
			t.Fatalf("%s: Reserve: %v, want ErrReservationsNotSupported", m, err)
		}
	}
}
