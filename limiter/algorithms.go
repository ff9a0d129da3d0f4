package limiter

import (
	"fmt"
	"strings"
	"time"
)

// Algorithm names one of the six algorithms as configuration and metrics spell it.
type Algorithm string

const (
	FixedWindow   Algorithm = "fixed_window"   // a count per window of Period
	SlidingLog    Algorithm = "sliding_log"    // a timestamp per admitted unit
	SlidingWindow Algorithm = "sliding_window" // this window's count and the last's
	TokenBucket   Algorithm = "token_bucket"   // Burst tokens refilled at Rate per Period
	LeakyBucket   Algorithm = "leaky_bucket"   // a queue of Burst drained at Rate per Period
	GCRA          Algorithm = "gcra"           // a token bucket kept as one timestamp
)

// NumAlgorithms bounds AlgorithmSpec.Index, for arrays [NumAlgorithms]T.
const NumAlgorithms = int(algorithmCount)

// Param is a number a decision takes (times in µs), a Redis script's first arguments.
type Param uint8

const (
	ParamRate         Param = iota // Limit.Rate
	ParamQuota                     // Limit.Quota()
	ParamPeriod                    // Limit.Period in µs
	ParamWindowOffset              // WindowOffset in µs, 0 with AlignWindows
	ParamNoDelay                   // 1 with Limit.NoDelay, else 0
	// The calendar's window starts around now (µs; 0 without a Calendar): see the package doc.
	ParamCalendarPrev
	ParamCalendarStart
	ParamCalendarNext
	ParamCalendarAfter
)

// String returns the parameter's name ("rate", "quota", "period_us", ...).
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
	case ParamCalendarPrev:
		return "calendar_prev_us"
	case ParamCalendarStart:
		return "calendar_start_us"
	case ParamCalendarNext:
		return "calendar_next_us"
	case ParamCalendarAfter:
		return "calendar_after_us"
	}
	return fmt.Sprintf("Param(%d)", uint8(p))
}

// Value is the parameter for a decision on key under lim, now. It does not allocate.
func (p Param) Value(key string, lim Limit) int64 { return p.valueAt(key, lim, nil) }

func (p Param) valueAt(key string, lim Limit, w *calendarWindows) int64 {
	switch p {
	case ParamRate:
		return lim.Rate
	case ParamQuota:
		return lim.Quota()
	case ParamPeriod:
		return us(lim.Period)
	case ParamWindowOffset:
		if lim.AlignWindows || lim.Calendar != nil {
			return 0
		}
		return us(WindowOffset(key, lim.Period))
	case ParamNoDelay:
		if lim.NoDelay {
			return 1
		}
	case ParamCalendarPrev, ParamCalendarStart, ParamCalendarNext, ParamCalendarAfter:
		if lim.Calendar == nil {
			return 0
		}
		if w == nil {
			w = lim.Calendar.windowsAt(time.Now().UnixMicro())
		}
		return w[p-ParamCalendarPrev]
	}
	return 0
}

// AlgorithmSpec is everything about an algorithm but its arithmetic. Specs are
// immutable, safe for concurrent use.
type AlgorithmSpec struct {
	algorithm   Algorithm
	index       algorithmIndex
	bucket      bool
	approximate bool
	delays      bool
	params      []Param
	keySuffixes []string
	state       string
	redisState  string
	memoryState string
}

type algorithmIndex uint8

const (
	fixedWindowIndex algorithmIndex = iota
	slidingLogIndex
	slidingWindowIndex
	tokenBucketIndex
	leakyBucketIndex
	gcraIndex
	algorithmCount // also: not an algorithm
)

var algorithmTable = [NumAlgorithms]AlgorithmSpec{
	{
		algorithm: FixedWindow, index: fixedWindowIndex,
		params:      []Param{ParamRate, ParamPeriod, ParamWindowOffset, ParamCalendarPrev, ParamCalendarStart, ParamCalendarNext, ParamCalendarAfter},
		keySuffixes: []string{""},
		state:       "window start, count",
		redisState:  "one hash, 2 fields",
		memoryState: "stamp = window start (µs), units = units admitted in it, extra = the period (µs) that window was computed for × 2, + 1 when aligned; with a calendar, the window's end (µs)",
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

// AllAlgorithms returns every Algorithm, by Index, as a new slice.
func AllAlgorithms() []Algorithm {
	out := make([]Algorithm, NumAlgorithms)
	for i := range algorithmTable {
		out[i] = algorithmTable[i].algorithm
	}
	return out
}

// AlgorithmSpecs returns every spec, by Index, as a new slice.
func AlgorithmSpecs() []*AlgorithmSpec {
	out := make([]*AlgorithmSpec, NumAlgorithms)
	for i := range algorithmTable {
		out[i] = &algorithmTable[i]
	}
	return out
}

// SpecOf returns a's spec, or nil; a switch, as it runs on every decision.
func SpecOf(a Algorithm) *AlgorithmSpec {
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

// IsBucket reports whether a is a bucket algorithm (AlgorithmSpec.Bucket).
func (a Algorithm) IsBucket() bool {
	spec := SpecOf(a)
	return spec != nil && spec.bucket
}

func (s *AlgorithmSpec) quota(lim Limit) int64 {
	if s.bucket && lim.Burst > 0 {
		return lim.Burst
	}
	return lim.Rate
}

// Algorithm returns the algorithm.
func (s *AlgorithmSpec) Algorithm() Algorithm { return s.algorithm }

// Index is the algorithm's position in AllAlgorithms, below NumAlgorithms.
func (s *AlgorithmSpec) Index() int { return int(s.index) }

// Bucket reports whether the quota is a bucket rather than Rate per window.
func (s *AlgorithmSpec) Bucket() bool { return s.bucket }

// Exact reports whether the algorithm never exceeds its bound (all but sliding_window).
func (s *AlgorithmSpec) Exact() bool { return !s.approximate }

// Delays reports whether admitted requests carry a Delay (unless NoDelay).
func (s *AlgorithmSpec) Delays() bool { return s.delays }

// Staggered reports whether windows start at a per-key WindowOffset.
func (s *AlgorithmSpec) Staggered() bool {
	for _, p := range s.params {
		if p == ParamWindowOffset {
			return true
		}
	}
	return false
}

// Params returns the script's parameters, before cost and mode, as a new slice.
func (s *AlgorithmSpec) Params() []Param { return append([]Param(nil), s.params...) }

// NumParams is len(Params()) without the copy.
func (s *AlgorithmSpec) NumParams() int { return len(s.params) }

// AppendParams appends the Params' values for key under lim, now, to dst.
func (s *AlgorithmSpec) AppendParams(dst []int64, key string, lim Limit) []int64 {
	if lim.Calendar != nil {
		return s.AppendParamsAt(dst, key, lim, time.Now())
	}
	return s.appendParams(dst, key, lim, nil)
}

// AppendParamsAt is AppendParams at now instead of the clock's.
func (s *AlgorithmSpec) AppendParamsAt(dst []int64, key string, lim Limit, now time.Time) []int64 {
	var w *calendarWindows
	if lim.Calendar != nil {
		w = lim.Calendar.windowsAt(now.UnixMicro())
	}
	return s.appendParams(dst, key, lim, w)
}

func (s *AlgorithmSpec) appendParams(dst []int64, key string, lim Limit, w *calendarWindows) []int64 {
	for _, p := range s.params {
		dst = append(dst, p.valueAt(key, lim, w))
	}
	return dst
}

// KeySuffixes returns, as a new slice, what the Redis keys append to the base key, "" first.
func (s *AlgorithmSpec) KeySuffixes() []string { return append([]string(nil), s.keySuffixes...) }

// NumKeys is len(KeySuffixes()) without the copy.
func (s *AlgorithmSpec) NumKeys() int { return len(s.keySuffixes) }

// State says in words what the algorithm keeps per key.
func (s *AlgorithmSpec) State() string { return s.state }

// RedisState says in words how the Redis store keeps that state.
func (s *AlgorithmSpec) RedisState() string { return s.redisState }

// MemoryState says what the memory store's slot fields hold.
func (s *AlgorithmSpec) MemoryState() string { return s.memoryState }

// String returns the algorithm's name.
func (s *AlgorithmSpec) String() string { return string(s.algorithm) }
