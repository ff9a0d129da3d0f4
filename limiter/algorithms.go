package limiter

import (
	"fmt"
	"strings"
)

// Algorithm names one of the six rate-limiting algorithms. The identifiers
// are used verbatim in configuration, on the command line, in metric labels
// and in documentation. Everything else known about an algorithm is in its
// AlgorithmSpec (SpecOf).
type Algorithm string

// The six algorithms.
const (
	// FixedWindow counts requests in consecutive windows of Period. Cheapest,
	// but a client can send 2×Rate across a window boundary.
	FixedWindow Algorithm = "fixed_window"
	// SlidingLog keeps one timestamp per admitted unit: exact, memory grows with Rate.
	SlidingLog Algorithm = "sliding_log"
	// SlidingWindow weights the previous window's count by the share of it
	// still inside the sliding window: approximate, two counters per key.
	SlidingWindow Algorithm = "sliding_window"
	// TokenBucket holds up to Burst tokens refilled at Rate per Period.
	TokenBucket Algorithm = "token_bucket"
	// LeakyBucket is a queue of up to Burst requests drained at Rate per
	// Period; admitted requests carry the Delay to hold them for.
	LeakyBucket Algorithm = "leaky_bucket"
	// GCRA is the generic cell rate algorithm: a token bucket kept as one
	// timestamp (the theoretical arrival time) per key.
	GCRA Algorithm = "gcra"
)

// NumAlgorithms is the number of algorithms: AlgorithmSpec.Index is below
// it, so arrays indexed by algorithm can be [NumAlgorithms]T.
const NumAlgorithms = int(algorithmCount)

// Param is one number an algorithm's decision is parameterised by, in the
// units both stores count in (time in whole microseconds). The Redis
// scripts receive an algorithm's Params, in its order, as their first
// arguments (see AlgorithmSpec.AppendParams).
type Param uint8

// The parameters of the algorithms.
const (
	// ParamRate is Limit.Rate.
	ParamRate Param = iota
	// ParamQuota is Limit.Quota(): the bucket size of a bucket algorithm.
	ParamQuota
	// ParamPeriod is Limit.Period in µs.
	ParamPeriod
	// ParamWindowOffset is where the key's windows start within a Period,
	// in µs: WindowOffset(key, Period), or 0 with Limit.AlignWindows.
	ParamWindowOffset
	// ParamNoDelay is 1 with Limit.NoDelay, else 0.
	ParamNoDelay
)

// String returns the parameter's name ("rate", "quota", "period_us",
// "window_offset_us", "no_delay").
func (p Param) String() string {
	switch p {
	case ParamRate:
		return "rate"
	case ParamQuota:
		return "quota"
	case ParamPeriod:
		return "period_us"
	case ParamWindowOffset:
		return "window_offset_us"
	case ParamNoDelay:
		return "no_delay"
	}
	return fmt.Sprintf("Param(%d)", uint8(p))
}

// Value is the parameter's value for a decision on key under lim. It does
// not allocate.
func (p Param) Value(key string, lim Limit) int64 {
	switch p {
	case ParamRate:
		return lim.Rate
	case ParamQuota:
		return lim.Quota()
	case ParamPeriod:
		return us(lim.Period)
	case ParamWindowOffset:
		if lim.AlignWindows {
			return 0
		}
		return us(WindowOffset(key, lim.Period))
	case ParamNoDelay:
		if lim.NoDelay {
			return 1
		}
	}
	return 0
}

// AlgorithmSpec is one row of the table of algorithms: what rl-exporter
// knows about an algorithm besides the arithmetic of its decisions (which
// is in MemoryStore and in redisstore's lua/<name>.lua). The memory store,
// the Redis store and the collector are driven by it, so that an
// algorithm is described in one place. Specs are immutable, returned as
// pointers into the table, and safe for concurrent use.
type AlgorithmSpec struct {
	algorithm Algorithm
	index     algorithmIndex
	// bucket: the quota is Burst and Rate/Period a refill (or drain) rate;
	// otherwise the quota is Rate per window of Period.
	bucket bool
	// approximate: it may admit more than the quota in a span of one
	// Period (sliding_window: up to about twice, see the package doc).
	approximate bool
	// delays: admitted requests carry a Delay to hold them for.
	delays bool
	// params are the script arguments before the cost and the mode.
	params []Param
	// keySuffixes are the Redis keys a decision touches, appended to the
	// key's base key, in the order the script receives them.
	keySuffixes []string
	state       string // what is kept per key, in words
	redisState  string // how it is kept on Redis, in words
	memoryState string // how it is kept in a memSlot: the meaning of its fields
}

// algorithmIndex is an Algorithm as a small integer: its
// AlgorithmSpec.Index. A memSlot's tag is it + 1.
type algorithmIndex uint8

// The algorithms' indexes: the order of the table.
const (
	fixedWindowIndex algorithmIndex = iota
	slidingLogIndex
	slidingWindowIndex
	tokenBucketIndex
	leakyBucketIndex
	gcraIndex
	algorithmCount // also: not an algorithm
)

// algorithmTable is the table, in the order of AllAlgorithms.
var algorithmTable = [NumAlgorithms]AlgorithmSpec{
	{
		algorithm: FixedWindow, index: fixedWindowIndex,
		params:      []Param{ParamRate, ParamPeriod, ParamWindowOffset},
		keySuffixes: []string{""},
		state:       "window start, count",
		redisState:  "one hash, 2 fields",
		memoryState: "stamp = window start (µs), units = units admitted in it, extra = the period (µs) that window was computed for × 2, + 1 when aligned",
	},
	{
		algorithm: SlidingLog, index: slidingLogIndex,
		params:      []Param{ParamRate, ParamPeriod},
		keySuffixes: []string{"", ":seq"},
		state:       "one entry per admitted unit: grows with Rate",
		redisState:  "one sorted-set member per unit in the window, a counter",
		memoryState: "log = the admissions inside the window, one (timestamp, units) pair per distinct µs",
	},
	{
		algorithm: SlidingWindow, index: slidingWindowIndex, approximate: true,
		params:      []Param{ParamRate, ParamPeriod, ParamWindowOffset},
		keySuffixes: []string{""},
		state:       "window start, 2 counts",
		redisState:  "one hash, 3 fields",
		memoryState: "stamp = window start (µs), units = units admitted in this window, extra = in the window before",
	},
	{
		algorithm: TokenBucket, index: tokenBucketIndex, bucket: true,
		params:      []Param{ParamQuota, ParamRate, ParamPeriod},
		keySuffixes: []string{""},
		state:       "level, time",
		redisState:  "one hash, 2 fields",
		memoryState: "stamp = last update (µs), units = the level: tokens, in 1/Period units",
	},
	{
		algorithm: LeakyBucket, index: leakyBucketIndex, bucket: true, delays: true,
		params:      []Param{ParamQuota, ParamRate, ParamPeriod, ParamNoDelay},
		keySuffixes: []string{""},
		state:       "level, time",
		redisState:  "one hash, 2 fields",
		memoryState: "stamp = last update (µs), units = the level: queued units, in 1/Period units",
	},
	{
		algorithm: GCRA, index: gcraIndex, bucket: true,
		params:      []Param{ParamQuota, ParamRate, ParamPeriod},
		keySuffixes: []string{""},
		state:       "one timestamp (TAT)",
		redisState:  "one string",
		memoryState: "stamp = the bits of the theoretical arrival time (µs, float64)",
	},
}

// AllAlgorithms returns every Algorithm in a stable order (the order of
// AlgorithmSpec.Index), as a new slice the caller may keep or change.
func AllAlgorithms() []Algorithm {
	out := make([]Algorithm, NumAlgorithms)
	for i := range algorithmTable {
		out[i] = algorithmTable[i].algorithm
	}
	return out
}

// AlgorithmSpecs returns the spec of every algorithm, in the order of
// AllAlgorithms, as a new slice.
func AlgorithmSpecs() []*AlgorithmSpec {
	out := make([]*AlgorithmSpec, NumAlgorithms)
	for i := range algorithmTable {
		out[i] = &algorithmTable[i]
	}
	return out
}

// SpecOf returns a's spec, or nil when a is not an algorithm. It does not
// allocate, and is as cheap as a comparison of a with the names: it runs
// on every decision (Limit.Quota, the stores).
func SpecOf(a Algorithm) *AlgorithmSpec {
	// A switch on the names rather than a loop over the table: the
	// compiler turns it into a few comparisons of lengths and words. A
	// test holds it to the table.
	switch a {
	case FixedWindow:
		return &algorithmTable[fixedWindowIndex]
	case SlidingLog:
		return &algorithmTable[slidingLogIndex]
	case SlidingWindow:
		return &algorithmTable[slidingWindowIndex]
	case TokenBucket:
		return &algorithmTable[tokenBucketIndex]
	case LeakyBucket:
		return &algorithmTable[leakyBucketIndex]
	case GCRA:
		return &algorithmTable[gcraIndex]
	}
	return nil
}

// ParseAlgorithm returns the Algorithm named s, or an error listing the valid names.
func ParseAlgorithm(s string) (Algorithm, error) {
	if spec := SpecOf(Algorithm(s)); spec != nil {
		return spec.algorithm, nil
	}
	names := make([]string, NumAlgorithms)
	for i := range algorithmTable {
		names[i] = string(algorithmTable[i].algorithm)
	}
	return "", fmt.Errorf("unknown algorithm %q (want one of %s)", s, strings.Join(names, ", "))
}

// IsBucket reports whether the algorithm is one of the bucket algorithms,
// whose quota is Burst rather than Rate.
func (a Algorithm) IsBucket() bool {
	spec := SpecOf(a)
	return spec != nil && spec.bucket
}

// quota is lim.Quota() for a limit of this algorithm.
func (s *AlgorithmSpec) quota(lim Limit) int64 {
	if s.bucket && lim.Burst > 0 {
		return lim.Burst
	}
	return lim.Rate
}

// Algorithm returns the algorithm's name.
func (s *AlgorithmSpec) Algorithm() Algorithm { return s.algorithm }

// Index is the algorithm's position in AllAlgorithms, below NumAlgorithms:
// an index for arrays of per-algorithm things.
func (s *AlgorithmSpec) Index() int { return int(s.index) }

// Bucket reports whether it is a bucket algorithm (token_bucket,
// leaky_bucket, gcra): the quota is Burst and Rate per Period the refill or
// drain rate. Otherwise it is a window algorithm: the quota is Rate per
// window of Period.
func (s *AlgorithmSpec) Bucket() bool { return s.bucket }

// Exact reports whether the algorithm never admits more than its bound:
// Rate in any span of one Period for a window algorithm (fixed_window
// counts per window, so its bound is per window), Burst + Rate·W/Period in
// any span W for a bucket. sliding_window is approximate: it assumes the
// previous window's admissions were spread evenly, and can admit up to
// about twice Rate in a span of one Period.
func (s *AlgorithmSpec) Exact() bool { return !s.approximate }

// Delays reports whether admitted requests carry a Delay to hold them for
// (leaky_bucket without Limit.NoDelay).
func (s *AlgorithmSpec) Delays() bool { return s.delays }

// Staggered reports whether the algorithm's windows start at a per-key
// offset (WindowOffset) unless Limit.AlignWindows is set.
func (s *AlgorithmSpec) Staggered() bool {
	for _, p := range s.params {
		if p == ParamWindowOffset {
			return true
		}
	}
	return false
}

// Params returns the algorithm's parameters, in the order its Redis
// script receives them (before the cost and the mode), as a new slice.
func (s *AlgorithmSpec) Params() []Param { return append([]Param(nil), s.params...) }

// NumParams is len(Params()) without the copy.
func (s *AlgorithmSpec) NumParams() int { return len(s.params) }

// AppendParams appends the values of the algorithm's Params for a decision
// on key under lim to dst and returns it. It allocates only when dst is
// too short.
func (s *AlgorithmSpec) AppendParams(dst []int64, key string, lim Limit) []int64 {
	for _, p := range s.params {
		dst = append(dst, p.Value(key, lim))
	}
	return dst
}

// KeySuffixes returns what a decision's Redis keys append to the key's
// base key (<prefix>:{<key>}:<algorithm>), in the order its script
// receives them: "" for the base key itself, then for instance ":seq". A
// new slice.
func (s *AlgorithmSpec) KeySuffixes() []string { return append([]string(nil), s.keySuffixes...) }

// NumKeys is len(KeySuffixes()) without the copy: the number of Redis keys
// one decision touches.
func (s *AlgorithmSpec) NumKeys() int { return len(s.keySuffixes) }

// State says in words what the algorithm keeps per key.
func (s *AlgorithmSpec) State() string { return s.state }

// RedisState says in words how the Redis store keeps that state.
func (s *AlgorithmSpec) RedisState() string { return s.redisState }

// MemoryState says how the memory store keeps that state in its slot.
func (s *AlgorithmSpec) MemoryState() string { return s.memoryState }

// String returns the algorithm's name.
func (s *AlgorithmSpec) String() string { return string(s.algorithm) }
