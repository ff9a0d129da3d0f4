package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
)

// reserveAll reserves n reservations of 1 on key, which must succeed.
func reserveAll(t *testing.T, s *redisstore.Store, key string, lim limiter.Limit, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("close-%s-%d", key, i)
		d, err := s.Reserve(context.Background(), key, lim, limiter.ReserveRequest{ID: ids[i], Estimate: 1, Hold: time.Minute}, 5*time.Second)
		if err != nil || !d.Allowed {
			t.Fatalf("reserve %d: %+v, %v", i, d, err)
		}
	}
	return ids
}

// answers collects the callbacks of asynchronous settles.
type answers struct {
	mu   sync.Mutex
	errs []error
}

func (a *answers) add(_ limiter.Settlement, err error) {
	a.mu.Lock()
	a.errs = append(a.errs, err)
	a.mu.Unlock()
}

func (a *answers) count(match func(error) bool) (n, all int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, err := range a.errs {
		if match(err) {
			n++
		}
	}
	return n, len(a.errs)
}

func TestCloseWaitsForQueuedSettlesThenRefusesCalls(t *testing.T) {
	srv := redistest.Single(t)
	s := redisstore.NewTestStore(t, redisstore.ClientConfig{URL: srv.URL()}, redisstore.Config{})
	lim := limiter.Limit{Algorithm: limiter.GCRA, Rate: 1000, Period: time.Second}
	const n = 200
	ids := reserveAll(t, s, "close-wait", lim, n)
	var got answers
	for _, id := range ids {
		s.SettleAsync(context.Background(), "close-wait", lim, id, 1, 5*time.Second, got.add)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	// Every settle was answered before Close returned, each by Redis.
	if ok, all := got.count(func(err error) bool { return err == nil }); ok != n || all != n {
		t.Fatalf("after Close: %d settles answered, %d of them without error; want %d and %d (%v)", all, ok, n, n, got.errs)
	}
	var late answers
	s.SettleAsync(context.Background(), "close-wait", lim, "close-after", 1, time.Second, late.add)
	if closed, all := late.count(func(err error) bool { return errors.Is(err, redisstore.ErrClosed) }); closed != 1 || all != 1 {
		t.Fatalf("a settle posted after Close: %v; want ErrClosed, at once", late.errs)
	}
	if _, err := s.DecideMode(context.Background(), "close-wait", lim, 1, limiter.ModeConsume, time.Second); !errors.Is(err, redisstore.ErrClosed) {
		t.Fatalf("a decision after Close: %v; want ErrClosed", err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
}

func TestCloseGivesUpAtItsDeadlineAndReportsTheSettlesItCouldNotSend(t *testing.T) {
	srv := redistest.Single(t)
	// One sender taking eight at a time: while its batch hangs, the
	// others stay queued (a queue of 4·8 holds them all, so no post waits).
	s := redisstore.NewTestStore(t, redisstore.ClientConfig{URL: srv.URL(), ReadTimeout: time.Minute, WriteTimeout: time.Minute},
		redisstore.Config{Batch: redisstore.BatchConfig{MaxSize: 8, Senders: 1}})
	lim := limiter.Limit{Algorithm: limiter.GCRA, Rate: 1000, Period: time.Second}
	const n = 30
	ids := reserveAll(t, s, "close-late", lim, n)
	srv.Freeze()
	t.Cleanup(srv.Thaw)
	var got answers
	for _, id := range ids {
		s.SettleAsync(context.Background(), "close-late", lim, id, 1, 3*time.Second, got.add)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := s.Close(ctx)
	if waited := time.Since(start); waited > 2*time.Second {
		t.Fatalf("Close took %s past its context's 200ms", waited)
	}
	if !errors.Is(err, redisstore.ErrClosed) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close with settles stuck: %v; want ErrClosed and the deadline", err)
	}
	// Those Close took back from the queue were answered with ErrClosed
	// before it returned: at least all but the batch on the wire.
	unsent, _ := got.count(func(err error) bool { return errors.Is(err, redisstore.ErrClosed) })
	if unsent < n-8 {
		t.Fatalf("%d settles answered ErrClosed at Close; want at least %d: %v", unsent, n-8, got.errs)
	}
	if want := fmt.Sprintf("%d unsent", unsent); !strings.Contains(err.Error(), want) {
		t.Fatalf("Close's error %q does not say %q", err, want)
	}
	// The ones on the wire still get an answer once Redis runs again.
	srv.Thaw()
	eventually(t, 10*time.Second, func() string { return fmt.Sprintf("answers: %v", got.errs) }, func() bool {
		_, all := got.count(func(error) bool { return true })
		return all == n
	})
	var once atomic.Int32
	s.SettleAsync(context.Background(), "close-late", lim, ids[0], 1, time.Second, func(_ limiter.Settlement, err error) {
		if errors.Is(err, redisstore.ErrClosed) {
			once.Add(1)
		}
	})
	if once.Load() != 1 {
		t.Fatal("a settle posted after Close was not refused at once with ErrClosed")
	}
}

// TestCloseGivesBackConnections: once Close returns, the store holds no connection of the
// client: neither the batch's senders, which otherwise keep theirs until they go idle (seconds
// later), nor its callers' own between calls. A caller closing the client next then closes no
// connection under a sender (go-redis logs "Unexpected conn state changed by hook to CLOSED"
// for each, at every shutdown).
func TestCloseGivesBackConnections(t *testing.T) {
	srv := redistest.Single(t)
	client, err := redisstore.ClientConfig{URL: srv.URL()}.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	s, err := redisstore.New(client, redisstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	// Calls at once, so that they are batched through the senders.
	lim := limiter.PerSecond(limiter.GCRA, 1_000_000)
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Go(func() {
			for i := range 20 {
				if d, err := s.Decide(context.Background(), fmt.Sprintf("close-conns-%d-%d", g, i), lim, 1); err != nil || !d.Allowed {
					t.Errorf("decide: %+v, %v", d, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if st := client.PoolStats(); st.TotalConns == st.IdleConns {
		t.Fatalf("no connection held by the store after its calls (%+v): the test shows nothing", st)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if st := client.PoolStats(); st.TotalConns != st.IdleConns {
		t.Errorf("after Close, %d connections are still checked out (%+v)", st.TotalConns-st.IdleConns, st)
	}
}
