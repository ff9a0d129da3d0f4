package simulate

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Pattern names a built-in traffic pattern.
type Pattern string

// The built-in patterns. Each is described relative to the limit (Rate
// requests per Period) it is played against.
const (
	// BoundaryBurst is the attack on fixed windows: Rate requests in the
	// 59th sixtieth of the first window and Rate more in the 61st sixtieth,
	// just after the boundary (for 60 per minute: 60 requests between 59 s
	// and 60 s, 60 between 61 s and 62 s).
	BoundaryBurst Pattern = "boundary-burst"
	// Steady is evenly spaced requests at 1.5 times the limit.
	Steady Pattern = "steady"
	// Spiky is random (Poisson) background traffic at half the limit, plus
	// a spike of Rate/2 to Rate requests within Period/30 at a random moment
	// of every Period.
	Spiky Pattern = "spiky"
	// Ramp is traffic whose rate rises linearly from zero to twice the
	// limit over the duration.
	Ramp Pattern = "ramp"
)

// Patterns lists the built-in patterns in a stable order.
var Patterns = []Pattern{BoundaryBurst, Steady, Spiky, Ramp}

// ParsePattern returns the Pattern named s, or an error listing the names.
func ParsePattern(s string) (Pattern, error) {
	for _, p := range Patterns {
		if string(p) == s {
			return p, nil
		}
	}
	return "", fmt.Errorf("unknown pattern %q (want one of boundary-burst, steady, spiky, ramp)", s)
}

// MaxArrivals bounds the number of requests one simulation replays, so that
// a typo in a duration cannot exhaust memory.
const MaxArrivals = 5_000_000

// DefaultDuration is how long a pattern runs when no duration is given:
// three periods for boundary-burst (the attack, then the leaky bucket's
// queue draining), five for the others.
func (p Pattern) DefaultDuration(period time.Duration) time.Duration {
	if p == BoundaryBurst {
		return 3 * period
	}
	return 5 * period
}

// Generate returns the arrival times of pattern p against a limit of rate
// requests per period over duration, as offsets from the start, in
// ascending order, at the stores' resolution of a microsecond. Only Spiky
// uses seed; every pattern is deterministic for a given seed. It is a pure
// function.
func Generate(p Pattern, rate int64, period, duration time.Duration, seed uint64) ([]time.Duration, error) {
	if rate <= 0 || period <= 0 || duration <= 0 {
		return nil, fmt.Errorf("pattern %s: rate, period and duration must be > 0", p)
	}
	// Expected request counts relative to the limit, checked before anything is allocated.
	periods := float64(duration) / float64(period)
	expected := map[Pattern]float64{BoundaryBurst: 2, Steady: 1.5 * periods, Spiky: 1.5 * periods, Ramp: periods}[p]
	if n := expected * float64(rate); n > MaxArrivals {
		return nil, fmt.Errorf("pattern %s: %.0f requests at this limit and duration, more than the %d a simulation replays", p, n, MaxArrivals)
	}
	var out []time.Duration
	switch p {
	case BoundaryBurst:
		slot := period / 60
		spacing := slot / time.Duration(rate)
		for _, from := range []time.Duration{59 * slot, 61 * slot} {
			for i := range rate {
				out = append(out, from+time.Duration(i)*spacing)
			}
		}
	case Steady:
		gap := time.Duration(float64(period) / (1.5 * float64(rate)))
		for at := time.Duration(0); at < duration; at += max(gap, time.Microsecond) {
			out = append(out, at)
		}
	case Spiky:
		rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
		mean := float64(period) / (0.5 * float64(rate))
		for at := time.Duration(rng.ExpFloat64() * mean); at < duration; at += time.Duration(rng.ExpFloat64() * mean) {
			out = append(out, at)
		}
		for start := time.Duration(0); start < duration; start += period {
			at := start + time.Duration(rng.Int64N(int64(period)))
			n := rate/2 + rng.Int64N(rate/2+1)
			spacing := period / 30 / time.Duration(max(n, 1))
			for i := range n {
				if t := at + time.Duration(i)*spacing; t < duration {
					out = append(out, t)
				}
			}
		}
		slices.Sort(out)
	case Ramp:
		// The rate at t is 2·rate/period · t/duration, so the i-th request
		// arrives when the integral reaches i: t = sqrt(i·period·duration/rate).
		for i := int64(0); ; i++ {
			at := time.Duration(math.Sqrt(float64(i) * float64(period) * float64(duration) / float64(rate)))
			if at >= duration {
				break
			}
			out = append(out, at)
		}
	default:
		return nil, fmt.Errorf("unknown pattern %q", p)
	}
	// The stores' clock resolution.
	for i := range out {
		out[i] = out[i].Truncate(time.Microsecond)
	}
	return out, nil
}

// ReadCSV reads arrival times, one per row, from the first column of a CSV
// file: either seconds since the start of the simulation (a decimal number
// ≥ 0, e.g. 59.25) or RFC 3339 timestamps (taken relative to the earliest
// one); one file uses one kind. Blank lines and lines starting with # are
// skipped, and a first row without digits is taken as a header. name is
// used in errors, which give the line of the first bad row. The times are
// returned sorted. It is safe for concurrent use on different readers.
func ReadCSV(r io.Reader, name string) ([]time.Duration, error) {
	cr := csv.NewReader(r)
	cr.Comment = '#'
	cr.FieldsPerRecord = -1
	cr.TrimLeadingSpace = true
	var (
		offsets []time.Duration
		stamps  []time.Time
		first   = true
	)
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		line, _ := cr.FieldPos(0)
		field := strings.TrimSpace(rec[0])
		if first && !strings.ContainsAny(field, "0123456789") {
			first = false
			continue // a header such as "timestamp"
		}
		first = false
		if secs, err := strconv.ParseFloat(field, 64); err == nil {
			if len(stamps) > 0 {
				return nil, fmt.Errorf("%s:%d: %q is seconds but earlier rows are RFC 3339 timestamps", name, line, field)
			}
			if secs < 0 || math.IsNaN(secs) || secs > float64(math.MaxInt64/int64(time.Second)) {
				return nil, fmt.Errorf("%s:%d: %q: seconds since the start must be between 0 and %d", name, line, field, math.MaxInt64/int64(time.Second))
			}
			offsets = append(offsets, time.Duration(secs*float64(time.Second)).Round(time.Microsecond))
		} else if ts, err := time.Parse(time.RFC3339Nano, field); err == nil {
			if len(offsets) > 0 {
				return nil, fmt.Errorf("%s:%d: %q is an RFC 3339 timestamp but earlier rows are seconds", name, line, field)
			}
			stamps = append(stamps, ts)
		} else {
			return nil, fmt.Errorf("%s:%d: %q is neither seconds since the start nor an RFC 3339 timestamp", name, line, field)
		}
		if len(offsets)+len(stamps) > MaxArrivals {
			return nil, fmt.Errorf("%s:%d: more than %d rows", name, line, MaxArrivals)
		}
	}
	if len(stamps) > 0 {
		earliest := slices.MinFunc(stamps, func(a, b time.Time) int { return a.Compare(b) })
		for _, ts := range stamps {
			offsets = append(offsets, ts.Sub(earliest).Round(time.Microsecond))
		}
	}
	if len(offsets) == 0 {
		return nil, fmt.Errorf("%s: no timestamps", name)
	}
	slices.Sort(offsets)
	return offsets, nil
}
