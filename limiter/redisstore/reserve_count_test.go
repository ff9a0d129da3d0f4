package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
)

var _ limiter.ReservationCounter = (*redisstore.Store)(nil)

// Counting reads Redis's clock and the open set only: a record past its hold is no longer
// counted but stays for the next reserve or settle to sweep, and a fresh key gets no key.
func TestCountingOpenReservationsWritesNothing(t *testing.T) {
	srv := redistest.Single(t)
	store := newStore(t, redisstore.ClientConfig{URL: srv.URL()})
	ctx := context.Background()
	lim := limiter.Limit{Algorithm: limiter.TokenBucket, Rate: 100, Period: time.Hour}
	l, err := limiter.New(limiter.Config{Limit: lim, Store: store, Timeout: 5 * time.Second, Hold: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := l.OpenReservations(ctx, "fresh"); err != nil || n != 0 {
		t.Fatalf("a fresh key: %d, %v; want 0", n, err)
	}
	if n, err := srv.Do("DBSIZE"); err != nil || n != int64(0) {
		t.Fatalf("DBSIZE after counting a fresh key = %v, %v; want 0", n, err)
	}
	if _, d, err := l.Reserve(ctx, "k", 10); err != nil || !d.Allowed {
		t.Fatalf("Reserve = %+v, %v", d, err)
	}
	if n, err := l.OpenReservations(ctx, "k"); err != nil || n != 1 {
		t.Fatalf("after a reservation: %d, %v; want 1", n, err)
	}
	eventually(t, 5*time.Second, func() string { return "the reservation past its hold still counted" }, func() bool {
		n, err := l.OpenReservations(ctx, "k")
		return err == nil && n == 0
	})
	book := store.ReservationKeys("k", lim.Algorithm)[0]
	if n, err := srv.Do("HLEN", book); err != nil || n != int64(2) {
		t.Fatalf("HLEN %s after counting = %v, %v; want the expired record left in place beside the book's own field", book, n, err)
	}
}
