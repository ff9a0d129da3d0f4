package limiter

import (
	"context"
	"fmt"
	"time"
)

// boundStore is a store bound to one validated Limit: the one interface
// through which a Limiter calls its store, for every mode. timeout, when
// > 0, bounds the call as well as ctx; a store that never waits ignores
// it. cost has been checked against the limit.
type boundStore interface {
	decide(ctx context.Context, key string, cost int64, mode Mode, timeout time.Duration) (Decision, error)
	reset(ctx context.Context, key string, timeout time.Duration) error
}

// bind binds st to lim, which has been validated. It is the one place
// that looks at what kind of store st is, once, when a Limiter is built:
//
//   - a MemoryStore gets lim compiled into its own units, so a decision
//     is neither validated again nor allocates;
//   - any other store is called as an Inspector (asInspector), which is
//     given the timeout itself (the Redis store bounds its network I/O by
//     it with one reusable timer, cheaper than a context.WithTimeout).
func bind(st Store, lim Limit) boundStore {
	if m, ok := st.(*MemoryStore); ok {
		return &memoryBinding{store: m, limit: compileLimit(lim)}
	}
	return inspectorBinding{store: asInspector(st), limit: lim}
}

// memoryBinding is a MemoryStore bound to a compiled limit.
type memoryBinding struct {
	store *MemoryStore
	limit compiledLimit
}

// memoryBinding.decide is in memory.go: it is the memory store's decision.

func (b *memoryBinding) reset(_ context.Context, key string, _ time.Duration) error {
	b.store.reset(key, b.limit.alg)
	return nil
}

// inspectorBinding is an Inspector bound to a limit.
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

// asInspector returns st as an Inspector: st itself when it is one; else
// st behind plainStore, which makes AllowN's decisions with Decide and
// answers the other modes, and Reset, with ErrNotSupported.
func asInspector(st Store) Inspector {
	if in, ok := st.(Inspector); ok {
		return in
	}
	return plainStore{st}
}

// plainStore is a Store that is no Inspector, called as one.
type plainStore struct{ Store }

// DecideMode is Decide bounded by timeout, for ModeConsume only.
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

// Reset returns ErrNotSupported.
func (p plainStore) Reset(context.Context, string, Limit, time.Duration) error {
	return fmt.Errorf("%s store: %w", p.Name(), ErrNotSupported)
}
