package limiter_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// Peeking at a key's leases counts those held, earliest expiry first, and takes, frees and drops
// nothing: a lease past its TTL is no longer counted, yet stays for the next acquire to count
// as expired.
func TestPeekingAtLeasesCountsThoseHeldAndChangesNothing(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	st := limiter.NewMemoryStore(limiter.MemoryConfig{Now: clock})
	ls, err := limiter.NewLeases(limiter.LeasesConfig{Limit: limiter.LeaseLimit{Limit: 3, TTL: 10 * time.Second}, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if u, err := ls.Peek(ctx, "k"); err != nil || u.InFlight != 0 || len(u.ExpiresIn) != 0 {
		t.Fatalf("a fresh key: %+v, %v; want nothing held", u, err)
	}
	if st.Leases("k") != 0 {
		t.Fatalf("peeking at a fresh key made %d leases", st.Leases("k"))
	}
	for range 2 {
		if _, d, err := ls.Acquire(ctx, "k"); err != nil || !d.Allowed {
			t.Fatalf("Acquire = %+v, %v", d, err)
		}
		advance(4 * time.Second)
	}
	u, err := ls.Peek(ctx, "k")
	if err != nil || u.InFlight != 2 || len(u.ExpiresIn) != 2 || u.ExpiresIn[0] != 2*time.Second || u.ExpiresIn[1] != 6*time.Second {
		t.Fatalf("two held: %+v, %v; want 2 in flight, expiring in 2s and 6s", u, err)
	}
	advance(3 * time.Second)
	if u, err := ls.Peek(ctx, "k"); err != nil || u.InFlight != 1 || len(u.ExpiresIn) != 1 || u.ExpiresIn[0] != 3*time.Second {
		t.Fatalf("one past its TTL: %+v, %v; want 1 in flight, expiring in 3s", u, err)
	}
	if st.Leases("k") != 2 {
		t.Fatalf("the store holds %d leases after the peek, want the expired one left for the next acquire", st.Leases("k"))
	}
	if _, d, err := ls.Acquire(ctx, "k"); err != nil || !d.Allowed || d.Expired != 1 || d.InFlight != 2 {
		t.Fatalf("the next acquire: %+v, %v; want it to count the expired lease the peek left", d, err)
	}
}
