package slo

import (
	"fmt"
	"time"
)

// The burn-rate tests replay traffic whose error ratio changes over time: a
// clean history, then a burn or a spike. Which rows fire at the checked time
// is worked out by burnSim, a small model of how Prometheus evaluates the
// generated rules: rate() over a window of counters sampled every step, in
// both the Prometheus 2 (window closed on the left) and 3 (open on the
// left) conventions, rules evaluated every eval steps, and for: counted from
// the first evaluation at which the condition held. Outcomes that the two
// conventions, or a 1 % nudge of a threshold, would change are not used, so
// the tests pass with promtool from either major release.

// burnSim is the error ratio, step by step, of one scenario.
type burnSim struct {
	step time.Duration
	// eval is the rule evaluation interval in steps.
	eval int
	// The clean history up to step historyEnd is sampled only every sparse
	// steps: it keeps long windows honest without making promtool read
	// days of dense samples.
	historyEnd, sparse int
	errors             []float64 // error ratio from step k-1 to k; errors[0] unused
	cum                []float64 // cum[k] = errors[1] + ... + errors[k]
}

// newBurnSim starts a scenario with a clean history of at least history,
// sampled every sparse steps and ending on an evaluation.
func newBurnSim(step time.Duration, eval, sparse int, history time.Duration) *burnSim {
	unit := lcm(eval, sparse)
	n := (int(history/step) + unit - 1) / unit * unit
	s := &burnSim{step: step, eval: eval, historyEnd: n, sparse: sparse}
	for i := 0; i <= n; i++ {
		s.push(0)
	}
	return s
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

func lcm(a, b int) int { return a / gcd(a, b) * b }

func (s *burnSim) push(ratio float64) {
	prev := 0.0
	if n := len(s.cum); n > 0 {
		prev = s.cum[n-1]
	} else {
		ratio = 0
	}
	s.errors = append(s.errors, ratio)
	s.cum = append(s.cum, prev+ratio)
}

// last is the last step of the scenario so far.
func (s *burnSim) last() int { return len(s.errors) - 1 }

// extend adds d of traffic at the given error ratio.
func (s *burnSim) extend(d time.Duration, ratio float64) {
	for range int(d / s.step) {
		s.push(ratio)
	}
}

// alignEval extends the scenario at the given ratio up to an evaluation.
func (s *burnSim) alignEval(ratio float64) {
	for s.last()%s.eval != 0 {
		s.push(ratio)
	}
}

func (s *burnSim) firstSampleFrom(k int) int {
	if k >= s.historyEnd {
		return k
	}
	return min((k+s.sparse-1)/s.sparse*s.sparse, s.historyEnd)
}

func (s *burnSim) lastSampleUpTo(k int) int {
	if k >= s.historyEnd {
		return k
	}
	return k / s.sparse * s.sparse
}

// ratio is the error ratio over window w at step t; ok is false when the
// window holds fewer than two samples. leftOpen selects Prometheus 3's
// convention. The total traffic is the same every step, so the ratio of
// the two rates is the mean error ratio between the first and the last
// sample of the window.
func (s *burnSim) ratio(t int, w time.Duration, leftOpen bool) (float64, bool) {
	lb := t - int(w/s.step)
	if leftOpen {
		lb = t - int((w+s.step-1)/s.step) + 1
	}
	k0, k1 := s.firstSampleFrom(max(lb, 0)), s.lastSampleUpTo(t)
	if k1-k0 < 1 {
		return 0, false
	}
	return (s.cum[k1] - s.cum[k0]) / float64(k1-k0), true
}

// tri is a three-valued truth: a condition too close to call is unknown.
type tri int

const (
	triFalse tri = iota
	triTrue
	triUnknown
)

const thresholdMargin = 0.01

func (s *burnSim) cond(row BurnRateRow, t int) tri {
	all, none := true, true
	for _, leftOpen := range []bool{false, true} {
		for _, nudge := range []float64{1 - thresholdMargin, 1 + thresholdMargin} {
			th := row.Threshold * nudge
			l, okL := s.ratio(t, row.Long, leftOpen)
			sh, okS := s.ratio(t, row.Short, leftOpen)
			v := okL && okS && l > th && sh > th
			all = all && v
			none = none && !v
		}
	}
	switch {
	case all:
		return triTrue
	case none:
		return triFalse
	}
	return triUnknown
}

// firing tells whether row's alert fires at evaluation step t: its
// condition has held at every evaluation for at least row.For. ok is false
// when that cannot be called safely.
func (s *burnSim) firing(row BurnRateRow, t int) (fires, ok bool) {
	switch s.cond(row, t) {
	case triFalse:
		return false, true
	case triUnknown:
		return false, false
	}
	// Count the earlier evaluations that surely (sure) or possibly
	// (maybe) held too.
	sure, maybe := 0, 0
	stillSure := true
	for k := t - s.eval; k >= 0; k -= s.eval {
		c := s.cond(row, k)
		if c == triFalse {
			break
		}
		if c == triUnknown {
			stillSure = false
		}
		maybe++
		if stillSure {
			sure++
		}
	}
	pending := func(n int) bool { return time.Duration(n*s.eval)*s.step >= row.For }
	if pending(sure) != pending(maybe) {
		return false, false
	}
	return pending(sure), true
}

// settle finds the rows firing at the end of the scenario. While the outcome
// is too close to call, or while a firing row's long window still reaches
// back before the change at step changeAt (its value would then depend on
// the Prometheus version), it extends the scenario with the error ratio
// keep, up to limit steps in all.
func (s *burnSim) settle(rows []BurnRateRow, changeAt int, keep float64, limit int) (at int, firing []int, err error) {
	s.alignEval(keep)
	start := s.last()
	for s.last()-start <= limit {
		t := s.last()
		firing = firing[:0]
		grow := 0
		for i, row := range rows {
			if !row.CanFire {
				continue
			}
			f, ok := s.firing(row, t)
			if !ok {
				grow = max(grow, 1)
				continue
			}
			if f {
				firing = append(firing, i)
				if back := changeAt - (t - int(row.Long/s.step)); back > 0 {
					grow = max(grow, back)
				}
			}
		}
		if grow == 0 {
			return t, firing, nil
		}
		for range grow {
			s.push(keep)
		}
		s.alignEval(keep)
	}
	return 0, nil, fmt.Errorf("no evaluation within %d steps where the outcome is clear", limit)
}
