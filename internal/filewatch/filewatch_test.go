package filewatch

import (
	"context"
	"crypto/sha256"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/eventually"
)

// A poll that reads a file between its writer's truncate and write sees
// content that never settles: with a Debounce it is no change, and the
// settled content is one change, not two.
func TestContentThatDoesNotHoldStillIsNoChange(t *testing.T) {
	old, empty, final := sha256.Sum256([]byte("a")), sha256.Sum256(nil), sha256.Sum256([]byte("b"))
	var mu sync.Mutex
	reads := 0
	digest := func() [32]byte {
		mu.Lock()
		defer mu.Unlock()
		reads++
		if reads == 1 { // the truncated file, read once, then written
			return empty
		}
		return final
	}
	var changes atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		Run(ctx, Config{Digest: digest, Since: old, Interval: 5 * time.Millisecond, Debounce: time.Millisecond}, func() { changes.Add(1) })
		close(done)
	}()
	defer func() { cancel(); <-done }()
	eventually.True(t, 5*time.Second, "ten reads", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return reads >= 10
	})
	if n := changes.Load(); n != 1 {
		t.Fatalf("%d changes for one write, want 1", n)
	}
}
