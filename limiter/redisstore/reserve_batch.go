package redisstore

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"time"
)

// reserveOp is one reservation call on its way: its keys and arguments,
// then its five integers or error.
type reserveOp struct {
	reserve bool
	keys    []string
	argv    []any
	ctx     context.Context
	ints    []int64
	err     error
	done    chan struct{}
}

// maxReserveBatch bounds the calls one batch script runs.
const maxReserveBatch = 128

// reserveBatcher sends an algorithm's reservation calls: one in progress
// alone, those that arrive meanwhile together in the next script call, so
// that concurrent callers share round trips and script runs as decisions
// do (batch.go). Its zero value is ready; safe for concurrent use.
type reserveBatcher struct {
	mu      sync.Mutex
	queue   []*reserveOp
	sending bool
}

// do queues op and waits for its answer or ctx. A call given up may still
// run: its reservation then expires by its policy.
func (b *reserveBatcher) do(ctx context.Context, s *Store, sc *reserveScripts, op *reserveOp) ([]int64, error) {
	op.ctx = ctx
	b.mu.Lock()
	b.queue = append(b.queue, op)
	if !b.sending {
		b.sending = true
		go b.send(s, sc)
	}
	b.mu.Unlock()
	select {
	case <-op.done:
		return op.ints, op.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// send runs the queue until it is empty, maxReserveBatch calls a script.
func (b *reserveBatcher) send(s *Store, sc *reserveScripts) {
	for {
		b.mu.Lock()
		ops := b.queue
		if len(ops) > maxReserveBatch {
			ops = ops[:maxReserveBatch:maxReserveBatch]
		}
		b.queue = b.queue[len(ops):]
		if len(ops) == 0 {
			b.queue, b.sending = nil, false
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		ctx, cancel := latestDeadline(ops)
		ints, err := s.runReserveOps(ctx, sc, ops)
		cancel()
		for i, op := range ops {
			if err == nil {
				op.ints = ints[5*i : 5*i+5]
			}
			op.err = err
			close(op.done)
		}
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// latestDeadline is a context bounded by the latest of the ops' deadlines,
// so that none is cut short; unbounded when one has none.
func latestDeadline(ops []*reserveOp) (context.Context, context.CancelFunc) {
	var latest time.Time
	for _, op := range ops {
		dl, ok := op.ctx.Deadline()
		if !ok {
			return context.WithCancel(context.Background())
		}
		if dl.After(latest) {
			latest = dl
		}
	}
	return context.WithDeadline(context.Background(), latest)
}

// runReserveOps runs one op with its own script, or many with the batch
// script, retrying TRYAGAIN, and returns five integers an op.
func (s *Store) runReserveOps(ctx context.Context, sc *reserveScripts, ops []*reserveOp) ([]int64, error) {
	var args []any
	script := &sc.batch
	if len(ops) == 1 {
		op := ops[0]
		script = &sc.settle
		if op.reserve {
			script = &sc.reserve
		}
		args = append(args, nil, nil, len(op.keys))
		for _, k := range op.keys {
			args = append(args, k)
		}
		args = append(args, op.argv...)
	} else {
		args = append(args, nil, nil, len(ops)*len(ops[0].keys))
		for _, op := range ops {
			for _, k := range op.keys {
				args = append(args, k)
			}
		}
		args = append(args, len(ops))
		for _, op := range ops {
			kind := 1
			if op.reserve {
				kind = 0
			}
			args = append(append(args, kind, len(op.argv)), op.argv...)
		}
	}
	var raw bytes.Buffer
	ints, err := s.run(ctx, s.client, script, args, &raw, nil)
	for backoff := tryAgainFirst; isTryAgain(err) && retryWait(ctx, backoff); backoff = min(2*backoff, tryAgainMax) {
		ints, err = s.run(ctx, s.client, script, args, &raw, ints)
	}
	if err != nil {
		s.noteError(err)
		return nil, err
	}
	if len(ops) == 1 {
		if want := 3 + 2*b2i(ops[0].reserve); len(ints) != want {
			return nil, fmt.Errorf("unexpected reply of %d integers, want %d", len(ints), want)
		}
		return append(ints, 0, 0)[:5], nil // settle answers three
	}
	if len(ints) != 5*len(ops) {
		return nil, fmt.Errorf("unexpected reply of %d integers for %d reservation calls", len(ints), len(ops))
	}
	return ints, nil
}
