package limiter

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Part is one limit of a request that several limits decide as one
// (SetStore.DecideSet, Set): the key the limit counts on, the Limit and
// the cost it takes. A plain value.
type Part struct {
	Key   string
	Limit Limit
	Cost  int64
}

// SetStore is a Store that decides the parts of one request as one: the
// request is admitted only when every part admits it, and a refused request
// takes nothing from any part. Implementations are safe for concurrent use.
type SetStore interface {
	Store
	// DecideSet decides parts in mode, ModeConsume or ModePeek, writes
	// parts[i]'s answer to out[i] as Set.Decide describes and reports
	// whether every part admitted. The caller checked every Limit and cost;
	// what CheckSet refuses is an error. A timeout > 0 bounds the call as
	// well as ctx. On error nothing was taken that the store could give
	// back, and out is to be ignored.
	DecideSet(ctx context.Context, parts []Part, mode Mode, timeout time.Duration, out []Decision) (allowed bool, err error)
}

// ErrSharedState is returned, wrapped, by DecideSet for two parts on one
// key under one algorithm: they would count on one state.
var ErrSharedState = errors.New("two parts of a set share one key and algorithm")

// CheckSet checks what every SetStore refuses of a set: no parts, a mode
// other than ModeConsume and ModePeek, out too short, two parts sharing a
// state. It does not validate the limits or costs.
func CheckSet(parts []Part, mode Mode, out []Decision) error {
	if len(parts) == 0 {
		return errors.New("a set of no parts")
	}
	if mode != ModeConsume && mode != ModePeek {
		return fmt.Errorf("mode %s: a set is decided in consume or peek mode: %w", mode, ErrNotSupported)
	}
	if len(out) < len(parts) {
		return fmt.Errorf("%d answers for %d parts", len(out), len(parts))
	}
	for i := 1; i < len(parts); i++ {
		for j := 0; j < i; j++ {
			if parts[i].Key == parts[j].Key && parts[i].Limit.Algorithm == parts[j].Limit.Algorithm {
				return fmt.Errorf("parts %d and %d on key %q under %s: %w", j, i, parts[i].Key, parts[i].Limit.Algorithm, ErrSharedState)
			}
		}
	}
	return nil
}

// Set decides several Limiters on one store for one request, all or
// nothing, as SetStore describes (requests and tokens per minute and a
// monthly quota, each on its own key); NewSet refuses a store that cannot.
//
// Each Limiter keeps its own fail policy, breaker and guard. The store is
// called once per decision when every part's breaker lets it (else not at
// all), and the outcome is recorded in each distinct breaker, the call
// told once to each distinct Observer as operation "set". When the store
// fails, each part's answer is its Limiter's FailPolicy's: open admits,
// closed refuses, local asks the local share; the set is admitted only when
// every policy admits, and only then are the local shares taken, one after
// another (a race on one instance may leave a refused set's local share
// taken; local shares are approximate anyway). A FailLocal part whose key
// is held to its local share after an outage is checked against the share
// before the store is called.
//
// A Set is safe for concurrent use; its Limiters may go on deciding alone
// beside it. Concurrency limits (Leases) are not parts of a set; Reserve
// holds chosen parts' costs in reservations, each settled on its Limiter.
type Set struct {
	limiters []*Limiter
	store    SetStore
	reserver SetReserver   // the store, when it can hold reservations in a set (Reserve)
	timeout  time.Duration // the least of the Limiters' (0: none but ctx)
	// mem is the store when every Limiter calls a MemoryStore directly
	// (Limiter.mem): the set then skips breakers, observers and errors.
	mem *MemoryStore
	cls []*compiledLimit
	// plain is true when no Limiter has a breaker, Observer, local share
	// or failure log: the set's call needs nothing around it.
	plain bool
}

// NewSet returns the Set of limiters, in order: a decision's keys and
// costs are given in that order. They must share one Store (the value
// passed to New), which must be a SetStore.
func NewSet(limiters ...*Limiter) (*Set, error) {
	if len(limiters) == 0 {
		return nil, errors.New("limiter: a set needs at least one Limiter")
	}
	st, name := storeOf(limiters[0])
	for i, l := range limiters[1:] {
		if l == nil {
			return nil, fmt.Errorf("limiter: set: Limiter %d is nil", i+1)
		}
		if other, _ := storeOf(l); other != st {
			return nil, fmt.Errorf("limiter: set: Limiter %d is on another store than Limiter 0: a set is decided on one store", i+1)
		}
	}
	ss, ok := st.(SetStore)
	if !ok {
		return nil, fmt.Errorf("limiter: set: the %s store cannot decide several limits as one (it is no SetStore)", name)
	}
	s := &Set{limiters: limiters, store: ss, plain: true}
	s.reserver, _ = st.(SetReserver)
	for _, l := range limiters {
		if l.timeout > 0 && (s.timeout == 0 || l.timeout < s.timeout) {
			s.timeout = l.timeout
		}
		if l.breaker != nil || l.observer != nil || l.local != nil || l.log != nil || l.sharded != nil {
			s.plain = false
		}
	}
	if m, ok := st.(*MemoryStore); ok {
		s.mem = m
		for _, l := range limiters {
			if l.mem == nil {
				s.mem = nil
				break
			}
			s.cls = append(s.cls, &l.mem.limit)
		}
	}
	return s, nil
}

// storeOf is the Store l was made with, and its name.
func storeOf(l *Limiter) (Store, string) {
	if l == nil {
		return nil, ""
	}
	switch b := l.store.(type) {
	case *memoryBinding:
		return b.store, l.storeName
	case inspectorBinding:
		if p, ok := b.store.(plainStore); ok {
			return p.Store, l.storeName
		}
		return b.store, l.storeName
	}
	return nil, l.storeName
}

// Len is the number of Limiters.
func (s *Set) Len() int { return len(s.limiters) }

// Limiters returns the Limiters, in order, as a new slice.
func (s *Set) Limiters() []*Limiter { return append([]*Limiter(nil), s.limiters...) }

// AllowN decides keys[i] at costs[i] under Limiter i (costs nil: 1 each),
// taking every cost or none, and returns each Limiter's answer (see Decide).
func (s *Set) AllowN(ctx context.Context, keys []string, costs []int64) ([]Decision, bool, error) {
	out := make([]Decision, len(s.limiters))
	ok, err := s.Decide(ctx, ModeConsume, keys, costs, out)
	return out, ok, err
}

// PeekN says what AllowN would answer now, taking nothing.
func (s *Set) PeekN(ctx context.Context, keys []string, costs []int64) ([]Decision, bool, error) {
	out := make([]Decision, len(s.limiters))
	ok, err := s.Decide(ctx, ModePeek, keys, costs, out)
	return out, ok, err
}

// Decide decides keys[i] at costs[i] under Limiter i (costs nil: 1 each)
// in mode, ModeConsume or ModePeek, writes Limiter i's answer to out[i]
// (len(out) ≥ Len) and reports whether the request is admitted. It does
// not allocate on a MemoryStore.
//
// Admitted (consume): each Limiter's state after taking, Admitted its
// cost. Refused or peeked: each Limiter's own answer, taking nothing:
// Allowed when it alone would admit (its Remaining and ResetAfter as they
// are), else refused with its RetryAfter; Admitted 0.
//
// A wrong number of keys or costs, a cost a Limiter refuses, or two
// Limiters of one algorithm on one key is an error, with nothing decided.
// When the store fails, each answer is its Limiter's policy's, with its
// Failure, and the error is returned beside them: follow the answers,
// count the error. When the caller cancels ctx, every answer is a refusal
// with FailureCanceled and the error wraps context.Canceled.
func (s *Set) Decide(ctx context.Context, mode Mode, keys []string, costs []int64, out []Decision) (bool, error) {
	return s.decide(ctx, mode, keys, costs, nil, out)
}

// decide is Decide, opening holds' reservations when admitted (nil: none; Reserve).
func (s *Set) decide(ctx context.Context, mode Mode, keys []string, costs []int64, holds []ReserveRequest, out []Decision) (bool, error) {
	n := len(s.limiters)
	if len(keys) != n || (costs != nil && len(costs) != n) || len(out) < n {
		return false, fmt.Errorf("limiter: set of %d: %d keys, %d costs, %d answers", n, len(keys), len(costs), len(out))
	}
	if mode != ModeConsume && mode != ModePeek {
		return false, fmt.Errorf("limiter: set: mode %s: %w", mode, ErrNotSupported)
	}
	for i, l := range s.limiters {
		if c := costAt(costs, i); c < 1 || c > l.quota {
			clear(out[:n])
			return false, fmt.Errorf("limiter: set: part %d: %w", i, l.lim.CheckCost(c))
		}
	}
	if s.mem != nil {
		return s.mem.decideSet(keys, s.cls, costs, mode, holds, out)
	}
	var buf [8]Part
	parts := buf[:0]
	if n > len(buf) {
		parts = make([]Part, 0, n)
	}
	for i, l := range s.limiters {
		parts = append(parts, Part{Key: keys[i], Limit: l.lim, Cost: costAt(costs, i)})
	}
	if s.plain {
		ok, err := s.call(ctx, parts, mode, holds, out)
		if err != nil {
			return s.failed(ctx, parts, mode, out, err)
		}
		return ok, nil
	}
	return s.guarded(ctx, parts, mode, holds, out)
}

// call asks the store to decide parts, holding holds when set (ReserveSet).
func (s *Set) call(ctx context.Context, parts []Part, mode Mode, holds []ReserveRequest, out []Decision) (bool, error) {
	if holds != nil {
		return s.reserver.ReserveSet(ctx, parts, holds, s.timeout, out)
	}
	return s.store.DecideSet(ctx, parts, mode, s.timeout, out)
}

func costAt(costs []int64, i int) int64 {
	if costs == nil {
		return 1
	}
	return costs[i]
}

// guarded is Decide around the breakers, observers and local shares.
func (s *Set) guarded(ctx context.Context, parts []Part, mode Mode, holds []ReserveRequest, out []Decision) (bool, error) {
	var bbuf [8]*CircuitBreaker
	breakers := bbuf[:0]
	for i, l := range s.limiters {
		if b := l.breakerFor(parts[i].Key); b != nil && !containsBreaker(breakers, b) {
			breakers = append(breakers, b)
		}
	}
	for i, b := range breakers {
		if !b.allow() {
			for _, took := range breakers[:i] {
				took.release()
			}
			return s.fail(ctx, parts, mode, out, ErrCircuitOpen)
		}
	}
	if mode == ModeConsume && s.heldLocally(ctx, parts, out) {
		return s.refusedLocally(ctx, parts, breakers, out)
	}
	start := time.Now()
	ok, err := s.call(ctx, parts, mode, holds, out)
	if !s.settle(ctx, breakers, start, err) {
		for i := range parts {
			out[i] = Decision{Limit: s.limiters[i].quota, Failure: FailureCanceled}
		}
		return false, fmt.Errorf("%s store: set: %w", s.limiters[0].storeName, context.Canceled)
	}
	if err != nil {
		return s.fail(ctx, parts, mode, out, fmt.Errorf("%s store: set: %w", s.limiters[0].storeName, err))
	}
	if mode == ModeConsume {
		for i, l := range s.limiters {
			if l.local != nil {
				d := l.local.afterStore(ctx, parts[i].Key, l.lim, mode, out[i])
				out[i].Remaining = d.Remaining
			}
		}
	}
	return ok, nil
}

func containsBreaker(bs []*CircuitBreaker, b *CircuitBreaker) bool {
	for _, x := range bs {
		if x == b {
			return true
		}
	}
	return false
}

// settle records the call's outcome in each breaker and tells each
// distinct Observer, unless the caller cancelled it: then it releases the
// probes and returns false. A zero start tells no Observer.
func (s *Set) settle(ctx context.Context, breakers []*CircuitBreaker, start time.Time, err error) bool {
	if err != nil && errors.Is(ctx.Err(), context.Canceled) {
		for _, b := range breakers {
			b.release()
		}
		return false
	}
	for _, b := range breakers {
		b.record(err == nil)
	}
	if start.IsZero() {
		return true
	}
	elapsed := time.Since(start)
	for i, l := range s.limiters {
		if l.observer == nil {
			continue
		}
		seen := false
		for _, m := range s.limiters[:i] {
			if m.observer == l.observer {
				seen = true
				break
			}
		}
		if !seen {
			l.observer.ObserveStore(ctx, "set", elapsed, err)
		}
	}
	return true
}

// heldLocally writes to out the local share's answer for each part still
// held to it after an outage (else a zero Decision); true if one refuses.
func (s *Set) heldLocally(ctx context.Context, parts []Part, out []Decision) bool {
	refused := false
	for i, l := range s.limiters {
		out[i] = Decision{}
		if l.local == nil {
			continue
		}
		if d, held := l.local.heldShare(ctx, parts[i].Key, l.lim, parts[i].Cost); held && !d.Allowed {
			d.Admitted = 0
			out[i], refused = d, true
		}
	}
	return refused
}

// refusedLocally answers a set a local share refused (out holds the
// shares' answers): the store, in peek mode, answers for the other parts.
func (s *Set) refusedLocally(ctx context.Context, parts []Part, breakers []*CircuitBreaker, out []Decision) (bool, error) {
	var hbuf [8]Decision
	held := append(hbuf[:0], out[:len(parts)]...)
	_, err := s.store.DecideSet(ctx, parts, ModePeek, s.timeout, out)
	if !s.settle(ctx, breakers, time.Time{}, err) {
		return s.failed(ctx, parts, ModePeek, out, err)
	}
	if err != nil {
		_, err = s.fail(ctx, parts, ModePeek, out, fmt.Errorf("%s store: set: %w", s.limiters[0].storeName, err))
	}
	for i, d := range held {
		if d.Limit != 0 {
			out[i] = d
		}
	}
	return false, err
}

// heldShare is the local share's peek for key while it is held to the
// share after an outage (afterStore); held is false otherwise.
func (f *LocalFallback) heldShare(ctx context.Context, key string, lim Limit, cost int64) (d Decision, held bool) {
	now := f.cfg.Now().UnixNano()
	sh := f.shard(key)
	sh.mu.Lock()
	e, known := sh.keys[key]
	sh.mu.Unlock()
	if !known || e.localUntil <= now {
		return Decision{}, false
	}
	share := Share(lim, e.instances)
	if cost > share.Quota() {
		return Decision{Limit: share.Quota(), RetryAfter: share.Window(), ResetAfter: share.Window()}, true
	}
	d, err := f.store.DecideMode(ctx, key, share, cost, ModePeek, 0)
	return d, err == nil
}

// failed is the store's failure of a plain set, or the caller's cancel.
func (s *Set) failed(ctx context.Context, parts []Part, mode Mode, out []Decision, err error) (bool, error) {
	if errors.Is(ctx.Err(), context.Canceled) {
		for i := range parts {
			out[i] = Decision{Limit: s.limiters[i].quota, Failure: FailureCanceled}
		}
		return false, fmt.Errorf("%s store: set: %w", s.limiters[0].storeName, context.Canceled)
	}
	return s.fail(ctx, parts, mode, out, fmt.Errorf("%s store: set: %w", s.limiters[0].storeName, err))
}

// fail answers each part by its Limiter's fail policy without taking,
// then, when every policy admits a consumed request, takes the local shares.
func (s *Set) fail(ctx context.Context, parts []Part, mode Mode, out []Decision, err error) (bool, error) {
	allowed := true
	for i, l := range s.limiters {
		out[i], _ = l.fail(ctx, parts[i].Key, parts[i].Cost, ModePeek, err)
		allowed = allowed && out[i].Allowed
	}
	if !allowed || mode != ModeConsume {
		return allowed, err
	}
	for i, l := range s.limiters {
		switch out[i].Failure {
		case FailureLocal:
			d, lerr := l.local.decide(ctx, parts[i].Key, l.lim, parts[i].Cost, ModeConsume)
			if lerr == nil {
				d.Failure = FailureLocal
				out[i] = d
			}
		case FailureOpen:
			out[i].Admitted = parts[i].Cost
		}
	}
	return true, err
}
