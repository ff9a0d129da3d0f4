package limiter

import (
	"sync"
	"sync/atomic"
	"time"
)

// BreakerConfig configures the circuit breaker in front of a store. After
// Threshold consecutive failures the store is not called for Cooldown; then
// one call is let through as a probe (the circuit is half-open), and a
// success closes the circuit while a failure opens it for another Cooldown.
type BreakerConfig struct {
	// Threshold is the number of consecutive failures that opens the
	// circuit; 0 disables the breaker.
	Threshold int
	// Cooldown is how long the circuit stays open. Default DefaultCooldown.
	Cooldown time.Duration
	// Now is the clock; default time.Now. Tests inject a fake.
	Now func() time.Time
	// Store names the store in CircuitObserver calls ("redis").
	Store string
	// Observer, when set, is told of every change of state.
	Observer CircuitObserver
	// MinFailing is how long the consecutive failures must also have gone
	// on before the circuit opens; 0: no minimum. With it, a store that
	// fails only some calls while answering others in between — a Redis
	// Cluster that lost one master, whose keys fail while the other
	// masters' succeed — does not open the circuit for every key, however
	// the failures interleave. serve uses DefaultMinFailing.
	MinFailing time.Duration
}

// Defaults of BreakerConfig, as serve applies them.
const (
	// DefaultThreshold is the consecutive failures that open the circuit.
	DefaultThreshold = 5
	// DefaultCooldown is how long an open circuit waits before a probe.
	DefaultCooldown = time.Second
	// DefaultMinFailing is how long serve's breaker needs the store to
	// have failed without a success before it opens.
	DefaultMinFailing = 100 * time.Millisecond
)

// CircuitState is the state of a circuit breaker. Its numeric values are
// those of the rate_limit_circuit_state gauge.
type CircuitState int32

// The states of a circuit breaker.
const (
	// CircuitClosed: the store is called.
	CircuitClosed CircuitState = 0
	// CircuitHalfOpen: one probe call is on its way; other calls skip the store.
	CircuitHalfOpen CircuitState = 1
	// CircuitOpen: the store is not called until the cooldown has passed.
	CircuitOpen CircuitState = 2
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

// CircuitObserver is told when a circuit breaker changes state (the
// collector sets a gauge, serve logs a line). It is called with the
// breaker's lock held, so that changes arrive in order: implementations
// must be quick and must not call back into the breaker. Safe for
// concurrent use across breakers.
type CircuitObserver interface {
	CircuitChanged(store string, from, to CircuitState)
}

// CircuitBreaker stops calling a failing store for a while. One breaker is
// meant to be shared by every Limiter on the same store (see Guard), so
// that they open together. It is safe for concurrent use; while closed,
// letting a call through and recording its success take no lock.
type CircuitBreaker struct {
	cfg      BreakerConfig
	state    atomic.Int32 // CircuitState, read without the lock
	failures atomic.Int64 // consecutive failures while closed
	mu       sync.Mutex
	openTill time.Time
	// firstFailure is when the current run of consecutive failures began.
	firstFailure time.Time
	// forgotten: the breaker was dropped (its shard left the store) and
	// tells the Observer nothing more.
	forgotten bool
}

// NewCircuitBreaker returns a closed breaker, or nil when cfg.Threshold is
// not positive (no breaker). A nil *CircuitBreaker lets every call through.
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

// State returns the current state (closed for a nil breaker).
func (b *CircuitBreaker) State() CircuitState {
	if b == nil {
		return CircuitClosed
	}
	return CircuitState(b.state.Load())
}

// allow reports whether the store may be called now. After the cooldown
// it lets exactly one call through as the probe and turns half-open.
func (b *CircuitBreaker) allow() bool {
	if CircuitState(b.state.Load()) == CircuitClosed {
		return true
	}
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

// record counts the outcome of a store call that allow let through.
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
	// Open: a call let through before the circuit opened has ended;
	// it changes nothing.
}

// release ends a call that allow let through without a verdict on the
// store (the caller cancelled it): a probe in flight gives its place to
// the next call.
func (b *CircuitBreaker) release() {
	if CircuitState(b.state.Load()) != CircuitHalfOpen {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if CircuitState(b.state.Load()) == CircuitHalfOpen {
		// Open with the cooldown already over: the next call probes.
		b.openTill = b.cfg.Now()
		b.setLocked(CircuitOpen)
	}
}

func (b *CircuitBreaker) openLocked() {
	b.openTill = b.cfg.Now().Add(b.cfg.Cooldown)
	b.setLocked(CircuitOpen)
}

// forget marks the breaker dropped and calls removed with its store name
// under its lock, so that no change of state is reported after it.
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
