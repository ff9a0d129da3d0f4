package limiter

import (
	"sync"
	"sync/atomic"
	"time"
)

// BreakerConfig configures a circuit breaker. After Threshold consecutive
// failures the store is not called for Cooldown; then one call probes
// (half-open): a success closes the circuit, a failure opens it again.
type BreakerConfig struct {
	Threshold int              // 0 disables the breaker
	Cooldown  time.Duration    // default DefaultCooldown
	Now       func() time.Time // default time.Now
	Store     string           // names the store to the Observer ("redis")
	Observer  CircuitObserver  // optional
	// MinFailing is how long the failures must also have gone on before the
	// circuit opens, so that a store failing only some keys (a Cluster that
	// lost one master) does not open it for all, however failures interleave.
	MinFailing time.Duration
}

// Defaults of BreakerConfig, as serve applies them.
const (
	DefaultThreshold  = 5
	DefaultCooldown   = time.Second
	DefaultMinFailing = 100 * time.Millisecond
)

// CircuitState is a breaker's state, numbered as the rate_limit_circuit_state gauge.
type CircuitState int32

const (
	CircuitClosed   CircuitState = 0 // the store is called
	CircuitHalfOpen CircuitState = 1 // one probe is on its way; others skip the store
	CircuitOpen     CircuitState = 2 // the store is not called until the cooldown ends
)

// String returns "closed", "half_open" or "open".
func (s CircuitState) String() string {
	switch s {
	case CircuitHalfOpen:
		return "half_open"
	case CircuitOpen:
		return "open"
	}
	return "closed"
}

// CircuitObserver is told of a breaker's changes, in order, under its lock:
// it must be quick, not call back, and be safe for concurrent use.
type CircuitObserver interface {
	CircuitChanged(store string, from, to CircuitState)
}

// CircuitBreaker stops calling a failing store for a while; the Limiters
// on one store share it through a Guard, so that they open together. It is
// safe for concurrent use, and lock-free while closed and succeeding.
type CircuitBreaker struct {
	cfg          BreakerConfig
	state        atomic.Int32 // CircuitState
	failures     atomic.Int64 // consecutive, while closed
	mu           sync.Mutex
	openTill     time.Time
	firstFailure time.Time // of the current run
	forgotten    bool      // dropped with its shard: reports nothing more
	// onRefused, set before the breaker is shared, is called outside the
	// lock for each call refused (a shard's: Guard.refreshShards).
	onRefused func()
}

// NewCircuitBreaker returns a closed breaker, or nil when cfg.Threshold is
// not positive; a nil breaker lets every call through.
func NewCircuitBreaker(cfg BreakerConfig) *CircuitBreaker {
	if cfg.Threshold <= 0 {
		return nil
	}
	if cfg.Cooldown <= 0 {
		cfg.Cooldown = DefaultCooldown
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &CircuitBreaker{cfg: cfg}
}

// State returns the current state; a nil breaker is closed.
func (b *CircuitBreaker) State() CircuitState {
	if b == nil {
		return CircuitClosed
	}
	return CircuitState(b.state.Load())
}

// allow reports whether the store may be called; after the cooldown, once.
// A call it refuses tells onRefused.
func (b *CircuitBreaker) allow() bool {
	if CircuitState(b.state.Load()) == CircuitClosed {
		return true
	}
	if b.admit() {
		return true
	}
	if b.onRefused != nil {
		b.onRefused()
	}
	return false
}

// admit is allow past a closed circuit.
func (b *CircuitBreaker) admit() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch CircuitState(b.state.Load()) {
	case CircuitClosed:
		return true
	case CircuitHalfOpen:
		return false
	}
	if b.cfg.Now().Before(b.openTill) {
		return false
	}
	b.setLocked(CircuitHalfOpen)
	return true
}

func (b *CircuitBreaker) record(ok bool) {
	if ok && CircuitState(b.state.Load()) == CircuitClosed {
		if b.failures.Load() != 0 {
			b.failures.Store(0)
		}
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch CircuitState(b.state.Load()) {
	case CircuitHalfOpen:
		if ok {
			b.failures.Store(0)
			b.setLocked(CircuitClosed)
			return
		}
		b.openLocked()
	case CircuitClosed:
		if ok {
			b.failures.Store(0)
			return
		}
		n := b.failures.Add(1)
		now := b.cfg.Now()
		if n == 1 {
			b.firstFailure = now
		}
		if n >= int64(b.cfg.Threshold) && now.Sub(b.firstFailure) >= b.cfg.MinFailing {
			b.openLocked()
		}
	}
	// Open: a call let through before the circuit opened changes nothing.
}

// release ends a cancelled call: a probe gives its place to the next call.
func (b *CircuitBreaker) release() {
	if CircuitState(b.state.Load()) != CircuitHalfOpen {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if CircuitState(b.state.Load()) == CircuitHalfOpen {
		b.openTill = b.cfg.Now()
		b.setLocked(CircuitOpen)
	}
}

func (b *CircuitBreaker) openLocked() {
	b.openTill = b.cfg.Now().Add(b.cfg.Cooldown)
	b.setLocked(CircuitOpen)
}

// forget calls removed under the lock, so that nothing is reported after.
func (b *CircuitBreaker) forget(removed func(store string)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.forgotten = true
	removed(b.cfg.Store)
}

func (b *CircuitBreaker) setLocked(to CircuitState) {
	from := CircuitState(b.state.Swap(int32(to)))
	if from != to && b.cfg.Observer != nil && !b.forgotten {
		b.cfg.Observer.CircuitChanged(b.cfg.Store, from, to)
	}
}
