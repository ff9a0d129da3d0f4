package limiter

import (
	"context"
	"fmt"
	"time"
)

// boundStore is a store bound to one validated Limit, through which a
// Limiter makes every call with a checked cost.
type boundStore interface {
	decide(ctx context.Context, key string, cost int64, mode Mode, timeout time.Duration) (Decision, error)
	reset(ctx context.Context, key string, timeout time.Duration) error
}

// bind is the one place that asks what kind of store st is. A MemoryStore
// gets lim compiled, so that a decision neither validates nor allocates;
// others are given the timeout, which the Redis store applies to its I/O
// more cheaply than a context would.
func bind(st Store, lim Limit) boundStore {
	if m, ok := st.(*MemoryStore); ok {
		return &memoryBinding{store: m, limit: compileLimit(lim)}
	}
	return inspectorBinding{store: asInspector(st), limit: lim}
}

type inspectorBinding struct {
	store Inspector
	limit Limit
}

func (b inspectorBinding) decide(ctx context.Context, key string, cost int64, mode Mode, timeout time.Duration) (Decision, error) {
	return b.store.DecideMode(ctx, key, b.limit, cost, mode, timeout)
}

func (b inspectorBinding) reset(ctx context.Context, key string, timeout time.Duration) error {
	return b.store.Reset(ctx, key, b.limit, timeout)
}

func asInspector(st Store) Inspector {
	if in, ok := st.(Inspector); ok {
		return in
	}
	return plainStore{st}
}

// plainStore calls a Store as an Inspector: ModeConsume alone, bounded by
// the timeout; other modes and Reset return ErrNotSupported.
type plainStore struct{ Store }

func (p plainStore) DecideMode(ctx context.Context, key string, lim Limit, cost int64, mode Mode, timeout time.Duration) (Decision, error) {
	if mode != ModeConsume {
		return Decision{}, fmt.Errorf("%s store: %w", p.Name(), ErrNotSupported)
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	return p.Decide(ctx, key, lim, cost)
}

func (p plainStore) Reset(context.Context, string, Limit, time.Duration) error {
	return fmt.Errorf("%s store: %w", p.Name(), ErrNotSupported)
}
