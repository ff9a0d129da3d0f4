package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// ErrClosed is the error of a call made after Store.Close, and of an
// asynchronous settle or release that Close took back from the queue
// unsent once its context ended.
var ErrClosed = errors.New("redis store closed")

// asyncOps counts the operations posted without a caller waiting
// (postOp) and not answered yet, so that Close can wait for them;
// lock-free, as every call reads it.
type asyncOps struct {
	n      atomic.Int64
	closed atomic.Bool
	// zero receives when n falls to 0 after Close.
	zero chan struct{}
}

// add counts one more operation on its way; false once the store is
// closed (counted first, so that Close sees it or it sees Close).
func (a *asyncOps) add() bool {
	a.n.Add(1)
	if a.closed.Load() {
		a.done()
		return false
	}
	return true
}

// done counts one operation answered.
func (a *asyncOps) done() {
	if a.n.Add(-1) == 0 && a.closed.Load() {
		select {
		case a.zero <- struct{}{}:
		default:
		}
	}
}

// isClosed reports whether Close was called.
func (a *asyncOps) isClosed() bool { return a.closed.Load() }

// Close flushes the store: it refuses further calls (they fail with
// ErrClosed) and waits, until ctx ends, for the settles and releases
// queued without their callers waiting (SettleAsync, ReleaseLeaseAsync)
// to be answered, each through its callback as usual. When ctx ends
// first, those still queued are taken back unsent, their callbacks called
// with ErrClosed, and Close returns an error wrapping ErrClosed that
// counts them and those still on the wire (whose callbacks get Redis's
// answer or their timeout's error later). A process that exits without
// Close loses what was queued silently. Close does not close the client,
// which is the caller's. Safe for concurrent use; a second Close waits
// alike.
func (s *Store) Close(ctx context.Context) error {
	s.async.closed.Store(true)
	for s.async.n.Load() > 0 {
		select {
		case <-s.async.zero:
		case <-ctx.Done():
			return s.closeLate(ctx)
		}
	}
	return nil
}

// closeLate ends a Close whose context ended first.
func (s *Store) closeLate(ctx context.Context) error {
	unsent := s.dropQueued()
	if left := int(s.async.n.Load()); left > 0 || unsent > 0 {
		return fmt.Errorf("redis store: closed before %d asynchronous settles and releases were answered (%d unsent: %w): %w",
			left+unsent, unsent, ErrClosed, ctx.Err())
	}
	return nil
}

// dropQueued answers every request still in a lane's queue with ErrClosed
// and returns how many of them were posted ones.
func (s *Store) dropQueued() (posted int) {
	if s.batch == nil {
		return 0
	}
	drain := func(ln *lane) {
		for {
			select {
			case r := <-ln.queue:
				if r.then != nil {
					posted++
				}
				deliver(r, limiter.Decision{}, nil, ErrClosed)
			default:
				return
			}
		}
	}
	if s.batch.one != nil {
		drain(s.batch.one)
	}
	s.batch.lanes.Range(func(_, l any) bool {
		drain(l.(*lane))
		return true
	})
	return posted
}
