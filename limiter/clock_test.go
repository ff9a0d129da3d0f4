package limiter_test

import (
	"slices"
	"sync"
	"time"
)

// epoch is a start time that is a whole multiple of an hour since the Unix
// epoch, so aligned windows of a second, a minute or an hour start on it.
var epoch = time.Unix(1_699_999_200, 0)

// fakeClock is a controllable clock for the memory store and the breaker.
type fakeClock struct {
	mu     sync.Mutex
	t      time.Time
	timers []*fakeTimer
}

// fakeTimer is a function AfterFunc armed to run when the clock reaches at.
type fakeTimer struct {
	at      time.Time
	f       func()
	stopped bool
}

func newFakeClock() *fakeClock { return &fakeClock{t: epoch} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Set moves the clock to epoch + d.
func (c *fakeClock) Set(d time.Duration) {
	c.mu.Lock()
	c.t = epoch.Add(d)
	c.mu.Unlock()
}

// Advance moves the clock by d and runs, in the calling goroutine and in
// the order of their times, the timers that came due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	var due []*fakeTimer
	kept := c.timers[:0]
	for _, tm := range c.timers {
		switch {
		case tm.stopped:
		case !tm.at.After(c.t):
			due = append(due, tm)
		default:
			kept = append(kept, tm)
		}
	}
	c.timers = kept
	c.mu.Unlock()
	slices.SortStableFunc(due, func(a, b *fakeTimer) int { return a.at.Compare(b.at) })
	for _, tm := range due {
		tm.f()
	}
}

// AfterFunc arms f to run when the clock has advanced by d, like
// time.AfterFunc; the function returned stops it.
func (c *fakeClock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	tm := &fakeTimer{at: c.t.Add(d), f: f}
	c.timers = append(c.timers, tm)
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		was := !tm.stopped
		tm.stopped = true
		return was
	}
}

// Armed is the number of timers armed and neither run nor stopped.
func (c *fakeClock) Armed() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, tm := range c.timers {
		if !tm.stopped {
			n++
		}
	}
	return n
}
