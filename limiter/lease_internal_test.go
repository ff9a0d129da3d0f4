package limiter

import (
	"context"
	"strconv"
	"testing"
	"time"
)

// Keys whose leases were never given back do not pile up: once the table
// holds minLeaseSweep keys, an acquire drops every expired one.
func TestKeysOfLeasesNeverGivenBackAreSwept(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	s := NewMemoryStore(MemoryConfig{Now: func() time.Time { return now }})
	lim := LeaseLimit{Limit: 1, TTL: time.Second}
	ctx := context.Background()
	for i := range minLeaseSweep - 1 {
		if d, _ := s.AcquireLease(ctx, "k"+strconv.Itoa(i), lim, "id", 0); !d.Allowed {
			t.Fatal("refused")
		}
	}
	now = now.Add(2 * time.Second)
	s.AcquireLease(ctx, "fresh", lim, "id", 0)
	if n := len(s.leases.keys); n != 1 {
		t.Fatalf("%d keys after the sweep, want the fresh one alone", n)
	}
	if s.leases.sweepAt != minLeaseSweep {
		t.Fatalf("next sweep at %d keys", s.leases.sweepAt)
	}
}
