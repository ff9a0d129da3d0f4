package redisstore

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/eventually"
	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/limiter"
)

// batchTally is a BatchTracer counting every batch a sender sends.
type batchTally struct{ n atomic.Int64 }

func (c *batchTally) TraceBatch(batch context.Context, _ []context.Context) (context.Context, func()) {
	c.n.Add(1)
	return batch, nil
}

// A decision made while another is on its way to a distant Redis, with
// room for one more call and nothing queued to join it, is sent by its own
// caller: no sender takes it (none traces a batch), so it costs no
// goroutine switch to one and back.
func TestADecisionWithRoomForACallOfItsOwnIsSentByItsCaller(t *testing.T) {
	srv := redistest.Single(t)
	link := redistest.Relay(t, srv.Addr())
	var tally batchTally
	store := NewTestStore(t, ClientConfig{URL: link.URL()}, Config{BatchTracer: &tally})
	ctx := context.Background()
	if err := store.Warm(ctx); err != nil {
		t.Fatal(err)
	}
	link.SetLatency(100 * time.Millisecond) // 200 ms a call, within the read timeout
	lim := limiter.Limit{Algorithm: limiter.GCRA, Rate: 1000, Period: time.Second}
	type ended struct {
		err error
		at  time.Time
	}
	first := make(chan ended, 1)
	go func() {
		_, err := store.DecideMode(ctx, "alone:first", lim, 1, limiter.ModeConsume, 5*time.Second)
		first <- ended{err, time.Now()}
	}()
	eventually.True(t, 5*time.Second, "the first decision in progress", func() bool { return store.batch.inFlight.Load() == 1 })
	start := time.Now()
	if _, err := store.DecideMode(ctx, "alone:second", lim, 1, limiter.ModeConsume, 5*time.Second); err != nil {
		t.Fatalf("second decision: %v", err)
	}
	f := <-first
	if f.err != nil {
		t.Fatalf("first decision: %v", f.err)
	}
	if !f.at.After(start) {
		t.Fatalf("the first decision ended %s before the second started: the second was not made while it was on its way", start.Sub(f.at))
	}
	if n := tally.n.Load(); n != 0 {
		t.Fatalf("%d batches sent by a sender, want none: the second decision was handed to one", n)
	}
}
