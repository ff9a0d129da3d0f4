package limiter

import (
	"context"
	"sync"
	"time"
)

// keeper calls renew every period until stopped or renew answers false:
// what keeps a reservation or lease open while its request is served. It
// runs on a timer, not a goroutine of its own, so an idle hold costs one
// timer; the renewals of concurrent requests meet in the store's batch.
type keeper struct {
	mu      sync.Mutex
	every   time.Duration
	renew   func(context.Context) bool
	timer   *time.Timer
	stopped bool
}

func keepAlive(every time.Duration, renew func(context.Context) bool) (stop func()) {
	k := &keeper{every: max(every, time.Millisecond), renew: renew}
	k.mu.Lock()
	k.timer = time.AfterFunc(k.every, k.tick)
	k.mu.Unlock()
	return k.stop
}

// tick renews once, bounded by the period, and schedules the next renewal
// a period after this one began, so that a slow store does not stretch the
// interval: a hold renewed every third of itself survives one lost renewal.
func (k *keeper) tick() {
	next := time.Now().Add(k.every)
	ctx, cancel := context.WithDeadline(context.Background(), next)
	more := k.renew(ctx)
	cancel()
	k.mu.Lock()
	defer k.mu.Unlock()
	if more && !k.stopped {
		k.timer.Reset(max(time.Until(next), 0))
	}
}

func (k *keeper) stop() {
	k.mu.Lock()
	k.stopped = true
	k.timer.Stop()
	k.mu.Unlock()
}
