package decision

import (
	"fmt"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// LiveLimit is a limit changed at run time (by the admin API or straight in
// the store), applied on top of a configured limit for one plan tier.
type LiveLimit struct {
	// Limit replaces the configured limit for the clients covered.
	Limit limiter.Limit
	// RolloutPercent is the share of clients covered, 0 to 100: a client is
	// covered when RolloutBucket(client) < RolloutPercent, so raising the
	// percentage keeps the clients already covered and adds others, and the
	// same clients are covered on every instance.
	RolloutPercent int
	// Shadow runs the change as a dark launch: the configured limit is still
	// enforced, and the covered clients' requests that the new limit would
	// refuse pass and are recorded as shadow_rejected.
	Shadow bool
	// Source names where the change comes from (a store key), for logs and limits listings.
	Source string
}

// Validate checks the rollout percent; the limit itself is checked by the
// limiter built from it.
func (l LiveLimit) Validate() error {
	if l.RolloutPercent < 0 || l.RolloutPercent > 100 {
		return fmt.Errorf("live limit %s: rollout percent must be 0 to 100, got %d", l.Source, l.RolloutPercent)
	}
	return nil
}

// Covers reports whether the change applies to client (a client key or a
// descriptor's store key).
func (l LiveLimit) Covers(client string) bool {
	switch {
	case l.RolloutPercent >= 100:
		return true
	case l.RolloutPercent <= 0:
		return false
	}
	return RolloutBucket(client) < l.RolloutPercent
}

// Enforced reports whether the change is enforced for some clients (not in
// shadow, rollout above 0): the limit gauges then show it.
func (l LiveLimit) Enforced() bool { return !l.Shadow && l.RolloutPercent > 0 }

// RolloutBucket places a client key in one of 100 buckets, 0 to 99, by a
// stable hash (FNV-1a, then a 64-bit finalizer): the same key lands in the
// same bucket in every process and release.
func RolloutBucket(client string) int {
	h := uint64(14695981039346656037)
	for i := 0; i < len(client); i++ {
		h ^= uint64(client[i])
		h *= 1099511628211
	}
	// splitmix64's finalizer spreads FNV's weak low bits.
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return int(h % 100)
}

// Live is a LiveLimit with the limiter that enforces it. It is immutable.
type Live struct {
	LiveLimit
	Limiter *limiter.Limiter
}

// NewLive validates lv and builds its limiter on engine (whose Limit is
// replaced by lv.Limit).
func NewLive(lv LiveLimit, engine limiter.Config) (*Live, error) {
	if err := lv.Validate(); err != nil {
		return nil, err
	}
	engine.Limit = lv.Limit
	l, err := limiter.New(engine)
	if err != nil {
		return nil, fmt.Errorf("live limit %s: %w", lv.Source, err)
	}
	return &Live{LiveLimit: lv, Limiter: l}, nil
}

// Apply resolves the live change for client: when it covers client, it
// either replaces a.Limiter (an enforced change; Apply reports true) or
// runs beside it in shadow (a.LiveShadow). A nil l applies nothing.
func (l *Live) Apply(a *Ask, client string) (replaced bool) {
	if l == nil || !l.Covers(client) {
		return false
	}
	if l.Shadow {
		a.LiveShadow = l.Limiter
		return false
	}
	a.Limiter = l.Limiter
	return true
}
