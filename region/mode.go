package region

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// Mode says how a limit is shared between regions. The identifiers are used
// verbatim in configuration (region_mode) and in metric labels.
type Mode string

// The four modes.
const (
	// ModeLocal: each region limits on its own Redis (today's behaviour).
	ModeLocal Mode = "local"
	// ModeStrict: a key's decisions run on its home region's Redis.
	ModeStrict Mode = "strict"
	// ModeAsync: each region decides on its own Redis against the counts
	// last shipped by the others.
	ModeAsync Mode = "async"
	// ModeHybrid: async below a threshold of the limit, strict above it.
	ModeHybrid Mode = "hybrid"
)

// modes is every Mode in a stable order.
var modes = [...]Mode{ModeLocal, ModeStrict, ModeAsync, ModeHybrid}

// AllModes returns every Mode in a stable order, in a new slice.
func AllModes() []Mode { return slices.Clone(modes[:]) }

// asyncAlgorithms are the algorithms whose state replicates as grow-only
// per-region slots (lua/slots.lua).
var asyncAlgorithms = []limiter.Algorithm{limiter.FixedWindow, limiter.SlidingWindow, limiter.TokenBucket, limiter.GCRA}

// ParseMode returns the Mode named s; "" is ModeLocal.
func ParseMode(s string) (Mode, error) {
	if s == "" {
		return ModeLocal, nil
	}
	if m := Mode(s); slices.Contains(modes[:], m) {
		return m, nil
	}
	names := make([]string, len(modes))
	for i, m := range modes {
		names[i] = string(m)
	}
	return "", fmt.Errorf("unknown region mode %q: choose one of %s", s, strings.Join(names, ", "))
}

// Algorithms lists the algorithms mode m supports, in AllAlgorithms order:
// all for local and strict, asyncAlgorithms for async and hybrid.
func Algorithms(m Mode) []limiter.Algorithm {
	switch m {
	case ModeLocal, ModeStrict:
		return limiter.AllAlgorithms()
	case ModeAsync, ModeHybrid:
		var out []limiter.Algorithm
		for _, a := range limiter.AllAlgorithms() {
			if slices.Contains(asyncAlgorithms, a) {
				out = append(out, a)
			}
		}
		return out
	}
	return nil
}

// Supports reports whether mode m can enforce algorithm a.
func Supports(m Mode, a limiter.Algorithm) bool {
	switch m {
	case ModeLocal, ModeStrict:
		_, err := limiter.ParseAlgorithm(string(a))
		return err == nil
	case ModeAsync, ModeHybrid:
		return slices.Contains(asyncAlgorithms, a)
	}
	return false
}

// OvershootBound is the worst case of admitted ÷ lim.Quota() for mode m,
// derived in docs/multi-region.md; otherRate is the other regions'
// admitted rate (per second), a hybridThreshold outside (0, 1] the default.
// An unknown mode or a limit with no quota gives NaN.
func OvershootBound(m Mode, lim limiter.Limit, regions int, otherRate float64, oneWay, syncInterval time.Duration, hybridThreshold float64) float64 {
	quota := float64(lim.Quota())
	if quota <= 0 || regions < 1 {
		return math.NaN()
	}
	if regions == 1 && m != ModeLocal {
		return 1
	}
	s := (syncInterval + oneWay).Seconds()
	unseen := math.Max(otherRate, 0) * s
	switch m {
	case ModeLocal:
		return float64(regions)
	case ModeStrict:
		return 1
	case ModeAsync:
		return 1 + unseen/quota
	case ModeHybrid:
		if hybridThreshold <= 0 || hybridThreshold > 1 {
			hybridThreshold = DefaultHybridThreshold
		}
		total := math.Max(otherRate, 0) * float64(regions) / float64(regions-1)
		late := float64(regions-1) * math.Max(0, 2*s*total-(1-hybridThreshold)*quota)
		return 1 + math.Min(unseen, late)/quota
	}
	return math.NaN()
}
