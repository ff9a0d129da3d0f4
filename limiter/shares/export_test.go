package shares

import (
	"context"
	"testing"
	"time"
)

// SlowSpans is slowSpans for tests.
const SlowSpans = slowSpans

// ChunkSize is chunkSize for tests.
var ChunkSize = chunkSize

// NewManual is New without the sweeper: the test sweeps, on its own clock. Closed by t.Cleanup.
func NewManual(t testing.TB, cfg Config) *Store {
	t.Helper()
	s, err := newStore(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			t.Error(err)
		}
	})
	return s
}

// Sweep is one sweep at now.
func (s *Store) Sweep(now time.Time) { s.sweep(now) }
