package shares

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// sweepEvery sweeps every Interval until Close.
func (s *Store) sweepEvery() {
	defer close(s.done)
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.sweep(s.now())
		}
	}
}

// sweep starts a new interval of demand: it gives back the chunks no longer in use (past
// until) and those of keys idle for their chunk's span, and forgets keys idle for slowSpans
// intervals with nothing pending, so that a slow key keeps the rate that sizes its chunks.
func (s *Store) sweep(now time.Time) {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for k, e := range sh.m {
			if e.demand == 0 {
				e.idle++
			} else {
				e.idle = 0
			}
			e.last, e.demand = e.demand, 0
			if e.spanned++; e.spanned >= 2*slowSpans {
				e.asked, e.spanned = e.asked/2, e.spanned/2
			}
			if e.filling != nil {
				continue
			}
			if e.id != "" && (e.idle >= e.spans || !now.Before(e.until)) {
				s.giveBack(k, e.detach())
			}
			if e.id == "" && e.idle >= slowSpans && !now.Before(e.recheck) {
				delete(sh.m, k)
			}
		}
		sh.mu.Unlock()
	}
}

// drain gives back every chunk, waiting for the reservations in flight to be answered first.
func (s *Store) drain(ctx context.Context) error {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for k, e := range sh.m {
			for e.filling != nil {
				w := e.filling
				sh.mu.Unlock()
				select {
				case <-w:
				case <-ctx.Done():
					return ctx.Err()
				}
				sh.mu.Lock()
			}
			s.giveBack(k, e.detach())
			delete(sh.m, k)
		}
		sh.mu.Unlock()
	}
	return nil
}

// giveBack settles c at what was used without waiting; nothing for no chunk.
func (s *Store) giveBack(k shareKey, c chunk) {
	if c.id == "" {
		return
	}
	s.count(c)
	if as, ok := s.inner.(limiter.AsyncSettler); ok {
		as.SettleAsync(context.Background(), k.key, k.lim, c.id, c.used, s.timeout, func(_ limiter.Settlement, err error) {
			s.settled(c, err)
		})
		return
	}
	go func() { s.settled(c, s.settleNow(context.Background(), k, c)) }()
}

// count counts a settle of c about to be sent.
func (s *Store) count(c chunk) {
	s.settles.Add(1)
	s.stats.settles.Add(1)
	s.stats.returned.Add(c.taken - c.used)
}

func (s *Store) settleNow(ctx context.Context, k shareKey, c chunk) error {
	_, err := s.inner.Settle(ctx, k.key, k.lim, c.id, c.used, s.timeout)
	return err
}

// settled counts the end of c's settle; a chunk not settled expires charged (doc.go). Nobody
// waits for a give-back, so its failure is logged here, summarised, before Done, so that Close
// returns after the line.
func (s *Store) settled(c chunk, err error) {
	if err != nil {
		if s.stats.settleErrors.Add(1) == 1 {
			s.stats.firstErr.Store(&err)
		}
		s.lostLog.LogSum(context.Background(),
			"shares: the shared store did not acknowledge a chunk given back; its reservation expires charged, its unused units lost to every replica for the rest of the window",
			[]slog.Attr{slog.String("store", s.Name()), slog.String("error", err.Error())}, "units", c.taken-c.used)
	}
	s.settles.Done()
}

// Stats are what a Store has done since New.
type Stats struct {
	Reserves     int64 // chunks asked of the shared store (granted or refused)
	Taken        int64 // units granted in chunks
	Returned     int64 // units given back unused (acknowledged or not)
	Plain        int64 // decisions of cold keys made on the shared store
	Settles      int64 // chunks given back
	SettleErrors int64 // give-backs the shared store did not acknowledge
}

type counters struct {
	reserves, settles, settleErrors atomic.Int64
	taken, returned, plain          atomic.Int64
	firstErr                        atomic.Pointer[error]
}

// Stats returns the counts so far; safe for concurrent use.
func (s *Store) Stats() Stats {
	return Stats{
		Reserves: s.stats.reserves.Load(), Taken: s.stats.taken.Load(), Returned: s.stats.returned.Load(),
		Settles: s.stats.settles.Load(), SettleErrors: s.stats.settleErrors.Load(), Plain: s.stats.plain.Load(),
	}
}
