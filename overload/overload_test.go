package overload

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/eventually"
)

type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

func newController(t *testing.T, cfg Config) (*Controller, *clock) {
	t.Helper()
	clk := &clock{now: time.Unix(1_700_000_000, 0)}
	cfg.Now = clk.Now
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, clk
}

// load offers the controller as many critical requests as it admits, each
// answered after latency(inFlight), for d of clock time.
func load(c *Controller, clk *clock, d time.Duration, latency func(inFlight int) time.Duration) {
	for end := clk.now.Add(d); clk.now.Before(end); {
		var tickets []Ticket
		for {
			tk, _, ok := c.Acquire(Critical)
			if !ok {
				break
			}
			tickets = append(tickets, tk)
		}
		clk.now = clk.now.Add(latency(len(tickets)))
		for _, tk := range tickets {
			tk.Done(false)
		}
	}
}

func constant(d time.Duration) func(int) time.Duration { return func(int) time.Duration { return d } }

func TestLimitShrinksUnderLatencyAndGrowsBack(t *testing.T) {
	c, clk := newController(t, Config{InitialLimit: 40})
	load(c, clk, 5*time.Second, constant(50*time.Millisecond))
	settled := c.Limit()
	if settled < 40 {
		t.Fatalf("limit %d fell at a steady latency from 40", settled)
	}
	load(c, clk, 3*time.Second, constant(200*time.Millisecond))
	shrunk := c.Limit()
	if shrunk > settled/2 {
		t.Fatalf("latency 4× the baseline: limit %d, want at most half of %d", shrunk, settled)
	}
	load(c, clk, 10*time.Second, constant(50*time.Millisecond))
	if back := c.Limit(); back <= shrunk*2 {
		t.Fatalf("latency back at the baseline: limit %d did not grow back from %d", back, shrunk)
	}
	if s := c.Stats(); s.Baseline < 40*time.Millisecond || s.Baseline > 150*time.Millisecond || s.Mean != 50*time.Millisecond {
		t.Fatalf("stats %+v: want a baseline near 50ms and a window mean of 50ms", s)
	}
}

func TestLimitSettlesWhereLatencyMeetsTolerance(t *testing.T) {
	// An upstream of 10 workers and 20 ms: each request beyond 10 in flight queues.
	queue := func(n int) time.Duration { return 20 * time.Millisecond * time.Duration(max(n, 10)) / 10 }
	c, clk := newController(t, Config{InitialLimit: 10, MinLimit: 5})
	load(c, clk, 20*time.Second, queue)
	// The limit keeps every worker busy, and queues no more than the
	// tolerance allows over the baseline (which drifts up slowly with it).
	s := c.Stats()
	if s.Limit <= 10 || float64(s.Mean) > 1.6*float64(s.Baseline) || s.Baseline > 40*time.Millisecond {
		t.Fatalf("stats %+v: want a limit above the 10 workers, a mean within 1.5× the baseline, a baseline near 20ms", s)
	}
}

func TestTargetBoundsTheLimit(t *testing.T) {
	// Latency already high at the start, so that the baseline is high too:
	// the target alone keeps the limit down.
	queue := func(n int) time.Duration { return 100 * time.Millisecond * time.Duration(max(n, 10)) / 10 }
	noTarget, clk := newController(t, Config{InitialLimit: 50})
	load(noTarget, clk, 10*time.Second, queue)
	withTarget, clk2 := newController(t, Config{InitialLimit: 50, Target: 300 * time.Millisecond})
	load(withTarget, clk2, 10*time.Second, queue)
	// 0.8 × 300 ms is reached at 24 in flight.
	if l := withTarget.Limit(); l > 26 {
		t.Fatalf("with a 300ms target: limit %d, want at most about 24 (latency 0.8 × target)", l)
	}
	if s := withTarget.Stats(); s.Quantile > 300*time.Millisecond {
		t.Fatalf("with a 300ms target the last window's p99 is %s", s.Quantile)
	}
	if noTarget.Limit() <= withTarget.Limit() {
		t.Fatalf("without target limit %d, with %d: the target did not bound it", noTarget.Limit(), withTarget.Limit())
	}
}

func TestLimitStaysWithinBounds(t *testing.T) {
	c, clk := newController(t, Config{InitialLimit: 10, MinLimit: 8, MaxLimit: 12})
	load(c, clk, 5*time.Second, constant(10*time.Millisecond))
	if l := c.Limit(); l != 12 {
		t.Fatalf("fast upstream: limit %d, want max_limit 12", l)
	}
	load(c, clk, 5*time.Second, constant(time.Second))
	if l := c.Limit(); l != 8 {
		t.Fatalf("slow upstream: limit %d, want min_limit 8", l)
	}
}

// rounds sends n requests at once, answered after 20 ms, failed where failed says, times times.
func rounds(c *Controller, clk *clock, times, n int, failed func(i int) bool) {
	for range times {
		tickets := make([]Ticket, 0, n)
		for range n {
			tk, _, _ := c.Acquire(Critical)
			tickets = append(tickets, tk)
		}
		clk.now = clk.now.Add(20 * time.Millisecond)
		for i, tk := range tickets {
			tk.Done(failed(i))
		}
	}
}

func TestLimitDoesNotGrowWhileUpstreamIsUnderused(t *testing.T) {
	c, clk := newController(t, Config{InitialLimit: 40})
	rounds(c, clk, 200, 15, func(int) bool { return false }) // under half the limit
	if l := c.Limit(); l != 40 {
		t.Fatalf("15 of 40 in flight at a low latency: limit %d, want it held at 40", l)
	}
}

func TestFailuresBackOff(t *testing.T) {
	c, clk := newController(t, Config{InitialLimit: 40})
	rounds(c, clk, 50, 40, func(i int) bool { return i%2 == 0 })
	if l := c.Limit(); l >= 40 {
		t.Fatalf("half the responses failed: limit %d did not fall from 40", l)
	}
}

func TestPriorityAdmission(t *testing.T) {
	c, _ := newController(t, Config{InitialLimit: 10, MinLimit: 1, Reserve: 0.2})
	admitted := func(p Priority) int {
		n := 0
		for {
			if _, _, ok := c.Acquire(p); !ok {
				return n
			}
			n++
		}
	}
	// Sheddable up to 10·0.8·0.8 = 6.4, default up to 8, critical up to 10.
	if n := admitted(Sheddable); n != 6 {
		t.Fatalf("sheddable admitted %d on an idle limit of 10, want 6", n)
	}
	if _, r, ok := c.Acquire(Sheddable); ok || r != ReasonReserved {
		t.Fatalf("sheddable at 6 in flight: admitted %v, reason %q, want shed as reserved", ok, r)
	}
	if n := admitted(Default); n != 2 {
		t.Fatalf("default admitted %d more at 6 in flight, want 2", n)
	}
	if n := admitted(Critical); n != 2 {
		t.Fatalf("critical admitted %d more at 8 in flight, want 2", n)
	}
	for _, p := range Priorities {
		if _, r, ok := c.Acquire(p); ok || r != ReasonLimit {
			t.Fatalf("%s at the limit: admitted %v, reason %q, want shed at the limit", p, ok, r)
		}
	}
	if s := c.Stats(); s.InFlight != 10 || s.Limit != 10 {
		t.Fatalf("stats %+v, want 10 in flight of 10", s)
	}
}

func TestSmallestLimitAdmitsEveryPriority(t *testing.T) {
	c, _ := newController(t, Config{InitialLimit: 1, MinLimit: 1})
	if _, _, ok := c.Acquire(Sheddable); !ok {
		t.Fatal("a limit of 1 with nothing in flight shed a sheddable request")
	}
}

func TestParsePriority(t *testing.T) {
	for _, p := range Priorities {
		if got, err := ParsePriority(p.String()); err != nil || got != p {
			t.Fatalf("ParsePriority(%q) = %v, %v", p, got, err)
		}
	}
	if p, err := ParsePriority(""); err != nil || p != Default {
		t.Fatalf(`ParsePriority("") = %v, %v, want default`, p, err)
	}
	if _, err := ParsePriority("urgent"); err == nil || !strings.Contains(err.Error(), "critical, default or sheddable") {
		t.Fatalf("ParsePriority(urgent): %v", err)
	}
}

func TestConfigErrorsNameTheKey(t *testing.T) {
	for _, tc := range []struct {
		cfg Config
		key string
	}{
		{Config{MinLimit: 10, MaxLimit: 5}, "max_limit"},
		{Config{InitialLimit: 2000}, "initial_limit"},
		{Config{Tolerance: 0.5}, "tolerance"},
		{Config{Smoothing: 2}, "smoothing"},
		{Config{Reserve: 1}, "critical_reserve"},
		{Config{Quantile: 1.5}, "quantile"},
		{Config{Target: -time.Second}, "target"},
		{Config{Headroom: 1.2}, "headroom"},
	} {
		if _, err := New(tc.cfg); err == nil || !strings.HasPrefix(err.Error(), tc.key+":") {
			t.Errorf("New(%+v): %v, want an error on %s", tc.cfg, err, tc.key)
		}
	}
}

func TestACriticalRequestWaitsForASlotAtTheLimit(t *testing.T) {
	c, _ := newController(t, Config{InitialLimit: 2, MinLimit: 1, CriticalWait: time.Minute})
	held := make([]Ticket, 2)
	for i := range held {
		held[i], _, _ = c.Acquire(Critical)
	}
	got := make(chan bool)
	go func() {
		_, _, ok := c.AcquireWait(context.Background(), Critical)
		got <- ok
	}()
	eventually.True(t, 5*time.Second, "the critical request waits", func() bool { return c.Stats().Waiting == 1 })
	if _, r, ok := c.AcquireWait(context.Background(), Sheddable); ok || r != ReasonLimit {
		t.Fatalf("a sheddable request at the limit: admitted %v, reason %q; want shed at once", ok, r)
	}
	held[0].Done(false)
	if !<-got {
		t.Fatal("the waiting critical request was shed when a slot freed")
	}
	if s := c.Stats(); s.InFlight != 2 || s.Waiting != 0 {
		t.Fatalf("stats %+v: want the freed slot taken by the waiter", s)
	}
}

func TestACriticalRequestIsShedWhenItsWaitEnds(t *testing.T) {
	c, _ := newController(t, Config{InitialLimit: 1, MinLimit: 1, CriticalWait: 10 * time.Millisecond})
	c.Acquire(Critical)
	if _, r, ok := c.AcquireWait(context.Background(), Critical); ok || r != ReasonLimit {
		t.Fatalf("no slot freed within the wait: admitted %v, reason %q; want shed at the limit", ok, r)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	noWait, _ := newController(t, Config{InitialLimit: 1, MinLimit: 1, CriticalWait: time.Minute})
	noWait.Acquire(Critical)
	if _, _, ok := noWait.AcquireWait(ctx, Critical); ok {
		t.Fatal("a request whose client is gone was admitted")
	}
	if s := noWait.Stats(); s.Waiting != 0 || s.InFlight != 1 {
		t.Fatalf("stats %+v: the gone request still waits or holds a slot", s)
	}
}
