package limiter

import (
	"sync"
	"time"
)

// BreakerConfig configures the circuit breaker in front of a store. After
// Threshold consecutive failures the store is not called for Cooldown; then
// one call is let through as a probe, and a success closes the circuit.
type BreakerConfig struct {
	// Threshold is the number of consecutive failures that opens the
	// circuit; 0 disables the breaker.
	Threshold int
	// Cooldown is how long the circuit stays open. Default 1s.
	Cooldown time.Duration
	// Now is the clock; default time.Now. Tests inject a fake.
	Now func() time.Time
}

type breaker struct {
	cfg      BreakerConfig
	mu       sync.Mutex
	failures int
	openTill time.Time
	probing  bool
}

func newBreaker(cfg BreakerConfig) *breaker {
	if cfg.Cooldown <= 0 {
		cfg.Cooldown = time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &breaker{cfg: cfg}
}

// allow reports whether the store may be called now.
func (b *breaker) allow() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.failures < b.cfg.Threshold {
		return true
	}
	if b.probing || b.cfg.Now().Before(b.openTill) {
		return false
	}
	b.probing = true
	return true
}

func (b *breaker) record(ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.probing = false
	if ok {
		b.failures = 0
		return
	}
	b.failures++
	if b.failures >= b.cfg.Threshold {
		b.openTill = b.cfg.Now().Add(b.cfg.Cooldown)
	}
}
