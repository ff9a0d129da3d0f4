package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// ErrClosed is the error of a call made after Store.Close, and of an asynchronous
// settle or release that Close took back unsent once its context ended.
var ErrClosed = errors.New("redis store closed")

// asyncOps counts the posted operations not answered yet, so that Close can wait
// for them; lock-free, as every call reads it.
type asyncOps struct {
	n      atomic.Int64
	closed atomic.Bool
	// zero receives when n falls to 0 after Close.
	zero chan struct{}
}

// add is false once the store is closed; it counts first, so that Close sees it or it sees Close.
func (a *asyncOps) add() bool {
	a.n.Add(1)
	if a.closed.Load() {
		a.done()
		return false
	}
	return true
}

func (a *asyncOps) done() {
	if a.n.Add(-1) == 0 && a.closed.Load() {
		select {
		case a.zero <- struct{}{}:
		default:
		}
	}
}

func (a *asyncOps) isClosed() bool { return a.closed.Load() }

// Close flushes the store: further calls fail with ErrClosed, and it waits until ctx
// ends for queued SettleAsync and ReleaseLeaseAsync calls, which a process without Close
// loses silently. When ctx ends first, those still queued get ErrClosed unsent, and Close
// returns an error wrapping ErrClosed that counts them and those still on the wire. Then
// it waits, until ctx ends, for the senders to give back their connections (kept for
// seconds after their last call otherwise) and gives back those its callers keep between
// calls (but one a call holds), so that closing the client, which stays the caller's,
// closes none under the store. Safe for concurrent use; a second Close waits alike.
func (s *Store) Close(ctx context.Context) error {
	s.async.closed.Store(true)
	for s.async.n.Load() > 0 {
		select {
		case <-s.async.zero:
		case <-ctx.Done():
			return s.closeLate(ctx)
		}
	}
	if s.batch != nil {
		s.batch.retire(ctx)
	}
	for i := range s.alone {
		s.alone[i].closeIdle()
	}
	return nil
}

func (s *Store) closeLate(ctx context.Context) error {
	unsent := s.dropQueued()
	if left := int(s.async.n.Load()); left > 0 || unsent > 0 {
		return fmt.Errorf("redis store: closed before %d asynchronous settles and releases were answered (%d unsent: %w): %w",
			left+unsent, unsent, ErrClosed, ctx.Err())
	}
	return nil
}

// dropQueued answers every queued request with ErrClosed; posted counts the posted ones.
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
