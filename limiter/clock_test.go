package limiter_test

import (
	"sync"
	"time"
)

// epoch is a start time that is a whole multiple of an hour since the Unix
// epoch, so aligned windows of a second, a minute or an hour start on it.
var epoch = time.Unix(1_699_999_200, 0)

// fakeClock is a controllable clock for the memory store and the breaker.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
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

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}
