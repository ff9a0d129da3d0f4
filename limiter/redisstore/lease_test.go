package redisstore_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
)

// Two stores on one Redis, as two instances: 64 acquirers, never more than
// the limit held, every release frees a slot for either.
func TestLeasesAreSharedAcrossStoresOnOneRedis(t *testing.T) {
	srv := redistest.Single(t)
	a, b := newStore(t, redisstore.ClientConfig{URL: srv.URL()}), newStore(t, redisstore.ClientConfig{URL: srv.URL()})
	lim := limiter.LeaseLimit{Limit: 5, TTL: time.Minute}
	ctx := context.Background()
	type held struct {
		st *redisstore.Store
		id string
	}
	var mu sync.Mutex
	var got []held
	var wg sync.WaitGroup
	for i := range 64 {
		st := a
		if i%2 == 1 {
			st = b
		}
		wg.Go(func() {
			id, _ := limiter.NewReservationID()
			d, err := st.AcquireLease(ctx, "k", lim, id, time.Second)
			if err != nil {
				t.Error(err)
				return
			}
			if d.Allowed {
				mu.Lock()
				got = append(got, held{st, id})
				mu.Unlock()
			} else if d.InFlight != 5 || d.RetryAfter != limiter.LeaseRetryAfter {
				t.Errorf("refused: %+v", d)
			}
		})
	}
	wg.Wait()
	if len(got) != 5 {
		t.Fatalf("%d leases taken, want 5", len(got))
	}
	if n, _ := srv.Do("ZCARD", a.LeaseKey("k")); n != int64(5) {
		t.Fatalf("ZCARD = %v, want 5", n)
	}
	other := a
	if got[0].st == a {
		other = b
	}
	if _, err := other.ReleaseLease(ctx, "k", got[0].id, time.Second); err != nil {
		t.Fatalf("any instance releases any lease: %v", err)
	}
	if _, err := a.ReleaseLease(ctx, "k", got[0].id, time.Second); !errors.Is(err, limiter.ErrLeaseUnknown) {
		t.Fatalf("released twice: %v", err)
	}
	id, _ := limiter.NewReservationID()
	if d, err := b.AcquireLease(ctx, "k", lim, id, time.Second); err != nil || !d.Allowed || d.InFlight != 5 {
		t.Fatalf("after a release: %+v %v", d, err)
	}
}

// A lease never released is dropped at its TTL on Redis's clock, counted
// as expired by the key's next call, and the key's set outlives its last
// lease by at least one TTL so that the count is not lost with it.
func TestLeasesExpireOnRedisAndAreCounted(t *testing.T) {
	srv := redistest.Single(t)
	st := newStore(t, redisstore.ClientConfig{URL: srv.URL()})
	ctx := context.Background()
	lim := limiter.LeaseLimit{Limit: 1, TTL: 200 * time.Millisecond}
	if d, err := st.AcquireLease(ctx, "k", lim, "leaked", time.Second); err != nil || !d.Allowed {
		t.Fatalf("%+v %v", d, err)
	}
	pttl, _ := srv.Do("PTTL", st.LeaseKey("k"))
	if ms, _ := pttl.(int64); ms <= 400 || ms > 600 {
		t.Fatalf("PTTL %v ms, want three TTLs of 200 ms: a fresh set's life", pttl)
	}
	d, err := st.AcquireLease(ctx, "k", lim, "second", time.Second)
	if err != nil || d.Allowed || d.RetryAfter <= 0 || d.RetryAfter > lim.TTL {
		t.Fatalf("full: want a refusal retried within the TTL: %+v %v", d, err)
	}
	var last limiter.LeaseDecision
	eventually(t, 5*time.Second, func() string { return "the leaked lease never expired: " + strconv.FormatInt(last.InFlight, 10) }, func() bool {
		last, err = st.AcquireLease(ctx, "k", lim, "second", time.Second)
		return err == nil && last.Allowed
	})
	if last.Expired != 1 || last.InFlight != 1 {
		t.Fatalf("the expired lease is counted once: %+v", last)
	}
	if n, err := st.ReleaseLease(ctx, "k", "leaked", time.Second); !errors.Is(err, limiter.ErrLeaseUnknown) || n != 0 {
		t.Fatalf("releasing the expired lease: %d %v", n, err)
	}
	if _, err := st.ReleaseLease(ctx, "k", "second", time.Second); err != nil {
		t.Fatal(err)
	}
	if n, _ := srv.Do("EXISTS", st.LeaseKey("k")); n != int64(0) {
		t.Fatal("an empty lease set is left behind")
	}
}

// The set's life is renewed only when under two TTLs are left, so right
// after any acquire it still outlives the new lease by one TTL, however
// the acquires fall between renewals.
func TestEveryAcquireLeavesTheSetTwoTTLsOfLife(t *testing.T) {
	srv := redistest.Single(t)
	st := newStore(t, redisstore.ClientConfig{URL: srv.URL()})
	ctx := context.Background()
	lim := limiter.LeaseLimit{Limit: 1_000_000, TTL: time.Second}
	// ms; slack: the PTTL read comes after the acquire, on a loaded machine by tens of ms.
	const twoTTLs, slack = 2000, 100
	renewals, last := 0, int64(0)
	for i := 0; renewals < 3; i++ {
		if i > 100_000 {
			t.Fatalf("the set's life was renewed %d times in %d acquires", renewals, i)
		}
		id, _ := limiter.NewReservationID()
		if d, err := st.AcquireLease(ctx, "k", lim, id, time.Second); err != nil || !d.Allowed {
			t.Fatalf("acquire %d: %+v %v", i, d, err)
		}
		reply, err := srv.Do("PTTL", st.LeaseKey("k"))
		ms, _ := reply.(int64)
		if err != nil || ms < twoTTLs-slack {
			t.Fatalf("acquire %d: PTTL %v ms (%v), want at least two TTLs (%d ms)", i, reply, err, twoTTLs)
		}
		if ms > last {
			renewals++
		}
		last = ms
	}
}

func TestLeaseKeyIsOneClusterSlotPerKey(t *testing.T) {
	st := newStore(t, redisstore.ClientConfig{URL: "redis://127.0.0.1:1/0"})
	if got, want := st.LeaseKey("a{b}c"), "rl:{a%7Bb%7Dc}:concurrency"; got != want {
		t.Fatalf("LeaseKey = %q, want %q", got, want)
	}
	if !limiter.SupportsLeases(st) {
		t.Fatal("the Redis store holds leases")
	}
}

func TestLeasesOnAFailedRedisReturnAnError(t *testing.T) {
	srv := redistest.Single(t)
	st := newStore(t, redisstore.ClientConfig{URL: srv.URL()})
	srv.Stop()
	_, err := st.AcquireLease(context.Background(), "k", limiter.LeaseLimit{Limit: 1, TTL: time.Second}, "x", 200*time.Millisecond)
	if err == nil {
		t.Fatal("no error from a stopped Redis")
	}
}
