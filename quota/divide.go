package quota

import (
	"math"
	"sort"
	"time"
)

// Defaults of Config.
const (
	// DefaultFloorShare: a new or idle client is given a twentieth of the limit, enough to serve
	// its first requests until its next report shows its demand.
	DefaultFloorShare = 0.05
	// DefaultMaxDemandFactor: a client's demand counts at most four times the limit, so that a
	// client inflating its reports takes at most 4/(4+others' demand in limits) of it, while an
	// honest client offering up to four times the limit is still shared in proportion.
	DefaultMaxDemandFactor = 4
	// fillResolution is the part of the limit one token per fill interval stands for: a bucket's
	// fill interval is long enough that tokens_per_fill, a whole number, is within a thousandth
	// of the limit of the share.
	fillResolution = 1000
	// maxFill bounds the fill interval of a limit whose unit is shorter.
	maxFill = time.Hour
)

// Limit is the rate shared: Rate requests per second across every client, and Burst the most
// taken at once across them. Period, the limit's unit, bounds the fill interval of the token
// buckets with an hour: the longer of the two.
type Limit struct {
	Rate   float64
	Burst  int64
	Period time.Duration
}

// Config tunes Divide; zero fields take the defaults.
type Config struct {
	// FloorShare is the part of the limit a client without a measured demand, or with none, is
	// given at least (never more than an equal split).
	FloorShare float64
	// MaxDemandFactor caps a client's demand at this many times the limit's rate.
	MaxDemandFactor float64
}

func (c Config) withDefaults() Config {
	if c.FloorShare <= 0 {
		c.FloorShare = DefaultFloorShare
	}
	if c.MaxDemandFactor <= 0 {
		c.MaxDemandFactor = DefaultMaxDemandFactor
	}
	return c
}

// Demand is one client's demand on a limit: requests per second, allowed and denied, when
// Known (a client that has sent one report only, its first, has none yet).
type Demand struct {
	Client string
	Rate   float64
	Known  bool
}

// TokenBucket enforces a share as Envoy's filter does: MaxTokens at most, TokensPerFill added
// every FillInterval (whole seconds, at least one: Envoy truncates it to seconds).
type TokenBucket struct {
	MaxTokens     uint32
	TokensPerFill uint32
	FillInterval  time.Duration
}

// Rate is the bucket's refill rate, requests per second.
func (b TokenBucket) Rate() float64 {
	return float64(b.TokensPerFill) / b.FillInterval.Seconds()
}

// Share is a client's part of the limit: Rate requests per second, enforced by Bucket.
type Share struct {
	Client string
	Rate   float64
	Bucket TokenBucket
}

// Divide shares lim among the clients of demands, sorted by client: each takes the limit in
// proportion to its demand (capped at MaxDemandFactor times the rate), except that a client
// whose proportional part is below the floor (new, idle, or small) is given the floor, the
// others sharing the rest. With no demand known at all the limit is split evenly. The shares'
// rates sum to at most lim.Rate; their buckets' refill rates are rounded down to a thousandth
// of it. Divide is a pure function, safe for concurrent use.
func Divide(lim Limit, demands []Demand, cfg Config) []Share {
	cfg = cfg.withDefaults()
	n := len(demands)
	if n == 0 {
		return nil
	}
	ds := append([]Demand(nil), demands...)
	sort.Slice(ds, func(i, j int) bool { return ds[i].Client < ds[j].Client })
	floor := min(cfg.FloorShare*lim.Rate, lim.Rate/float64(n))
	ceiling := cfg.MaxDemandFactor * lim.Rate
	want := make([]float64, n)
	for i, d := range ds {
		if d.Known && d.Rate > 0 {
			want[i] = min(d.Rate, ceiling)
		}
	}
	rates := waterFill(lim.Rate, floor, want)
	fill := fillInterval(lim)
	out := make([]Share, n)
	for i, d := range ds {
		out[i] = Share{Client: d.Client, Rate: rates[i], Bucket: bucketOf(lim, rates[i], fill)}
	}
	return out
}

// waterFill divides total in proportion to want, raising each part below floor to floor and
// dividing what is left among the others, until every part is at least floor. With nothing
// wanted, total is split evenly.
func waterFill(total, floor float64, want []float64) []float64 {
	rates := make([]float64, len(want))
	fixed := make([]bool, len(want))
	left := total
	for {
		sum, open := 0.0, 0
		for i, w := range want {
			if !fixed[i] {
				sum += w
				open++
			}
		}
		if open == 0 {
			return rates
		}
		if sum == 0 {
			for i := range rates {
				if !fixed[i] {
					rates[i] = left / float64(open)
				}
			}
			return rates
		}
		raised := false
		for i, w := range want {
			if !fixed[i] && left*w/sum < floor {
				rates[i], fixed[i], raised = floor, true, true
				left -= floor
			}
		}
		if !raised {
			for i, w := range want {
				if !fixed[i] {
					rates[i] = left * w / sum
				}
			}
			return rates
		}
	}
}

// fillInterval is the whole seconds a bucket of lim refills over: long enough that one token
// is a thousandth of the limit, at most the longer of the limit's period and maxFill, at least a
// second; Envoy refills continuously at tokens_per_fill over it, so a long interval costs no
// burst. It depends on the
// limit alone, so that two assignments of one bucket with equal tokens_per_fill have equal
// rates: Envoy's filter keeps its token bucket when max_tokens, tokens_per_fill and the fill
// interval's nanoseconds are unchanged, ignoring its seconds.
func fillInterval(lim Limit) time.Duration {
	secs := 1.0
	if lim.Rate > 0 {
		secs = math.Ceil(fillResolution / lim.Rate)
	}
	most := math.Max(maxFill.Seconds(), math.Floor(lim.Period.Seconds()))
	secs = math.Min(math.Max(secs, 1), most)
	return time.Duration(secs) * time.Second
}

// bucketOf is the token bucket of a share of rate per second: its refill rounded down (never
// more than the share) yet at least one token, its size the share's part of the burst.
func bucketOf(lim Limit, rate float64, fill time.Duration) TokenBucket {
	perFill := math.Floor(rate * fill.Seconds())
	maxTokens := 1.0
	if lim.Rate > 0 {
		maxTokens = math.Floor(float64(lim.Burst) * rate / lim.Rate)
	}
	return TokenBucket{
		MaxTokens:     uint32(min(max(maxTokens, 1), math.MaxUint32)),
		TokensPerFill: uint32(min(max(perFill, 1), math.MaxUint32)),
		FillInterval:  fill,
	}
}
