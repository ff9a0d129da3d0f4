package server

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// storeState is shared by every /readyz call so that probes cost the store one check
// per ReadyTimeout. Safe for concurrent use.
type storeState struct {
	ctx    context.Context // ends the check in flight at shutdown
	cancel context.CancelFunc

	mu      sync.Mutex
	err     error
	checked time.Time     // when the last answer came; zero before the first
	pending chan struct{} // closed when the check in flight ends; nil when none
}

func (st *storeState) init() { st.ctx, st.cancel = context.WithCancel(context.Background()) }

func (s *Server) storeErr(ctx context.Context) error {
	st := &s.store
	st.mu.Lock()
	if !st.checked.IsZero() && time.Since(st.checked) < s.cfg.ReadyTimeout {
		err := st.err
		st.mu.Unlock()
		return err
	}
	pending := st.pending
	if pending == nil {
		pending = make(chan struct{})
		st.pending = pending
		go s.checkStore(pending)
	}
	st.mu.Unlock()
	select {
	case <-pending:
	case <-ctx.Done():
		return ctx.Err()
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.err
}

// checkStore asks Config.Ready, keeps its answer and closes done. The error names
// the store's address, so it goes to the log, never to /readyz's clients.
func (s *Server) checkStore(done chan struct{}) {
	st := &s.store
	ctx, cancel := context.WithTimeout(st.ctx, s.cfg.ReadyTimeout)
	err := s.cfg.Ready(ctx)
	cancel()
	st.mu.Lock()
	was := st.err
	st.err, st.checked, st.pending = err, time.Now(), nil
	st.mu.Unlock()
	close(done)
	switch {
	case err != nil && was == nil:
		s.logger.Warn("store unreachable", slog.String("error", err.Error()))
	case err == nil && was != nil:
		s.logger.Info("store reachable again")
	}
}
