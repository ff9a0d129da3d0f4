package decision

import (
	"fmt"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// LiveLimit replaces a plan tier's configured limit at run time for the clients whose
// RolloutBucket is below RolloutPercent, so that every instance agrees and raising it keeps them.
// Shadow keeps the configured limit enforced and records as shadow_rejected what Limit would
// refuse. Source is the store key it comes from.
type LiveLimit struct {
	Limit          limiter.Limit
	RolloutPercent int
	Shadow         bool
	Source         string
}

// Validate checks the rollout percent (NewLive checks the limit).
func (l LiveLimit) Validate() error {
	if l.RolloutPercent < 0 || l.RolloutPercent > 100 {
		return fmt.Errorf("live limit %s: rollout percent must be 0 to 100, got %d", l.Source, l.RolloutPercent)
	}
	return nil
}

// Covers reports whether the change applies to client (a client key or a descriptor's store key).
func (l LiveLimit) Covers(client string) bool {
	switch {
	case l.RolloutPercent >= 100:
		return true
	case l.RolloutPercent <= 0:
		return false
	}
	return l.CoversBucket(RolloutBucket(client))
}

// CoversBucket reports whether the change applies to the clients of RolloutBucket b: a caller
// that decides per bucket once (several limits' changes at once) rather than per client.
func (l LiveLimit) CoversBucket(b int) bool { return b < l.RolloutPercent }

// Enforced reports whether some clients are held to Limit: gauges show it.
func (l LiveLimit) Enforced() bool { return !l.Shadow && l.RolloutPercent > 0 }

// RolloutBucket places a key in one of 100 buckets, the same in every process and release.
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

// Live is a LiveLimit with its limiter. It is immutable.
type Live struct {
	LiveLimit
	Limiter *limiter.Limiter
}

// NewLive validates lv and builds its limiter on engine.
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

// Apply puts the change in a when it covers client: in place of a.Limiter
// (reported true) or, in shadow, as a.LiveShadow. A nil l applies nothing.
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
