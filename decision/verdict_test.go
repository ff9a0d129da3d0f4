package decision

import (
	"errors"
	"fmt"
	"testing"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// answer is how a way in answers a verdict, as the middleware does.
type answer string

const (
	drop        answer = "nothing"
	pass        answer = "pass without headers"
	passLimited answer = "pass with the limit's headers"
	refuse      answer = "429 with the limit's headers"
	unavailable answer = "503 without the limit's headers"
)

func answerOf(v Verdict) answer {
	switch {
	case v.Drops():
		return drop
	case v.Refuses() && v.Limited():
		return refuse
	case v.Refuses():
		return unavailable
	case v.Limited():
		return passLimited
	}
	return pass
}

func TestJudgeGivesEachAnswerOfTheLimiterOneVerdictStatusAndAnswer(t *testing.T) {
	lim := limiter.PerMinute(limiter.FixedWindow, 10)
	storeDown := errors.New("store down")
	cases := []struct {
		name       string
		d          limiter.Decision
		err        error
		shadow     bool
		want       Verdict
		wantStatus limiter.Status
		wantAnswer answer
	}{
		{"an admitted request passes with the limit's headers", limiter.Decision{Allowed: true}, nil, false,
			VerdictAllowed, limiter.StatusAllowed, passLimited},
		{"a refused request is answered 429", limiter.Decision{}, nil, false,
			VerdictRejected, limiter.StatusRejected, refuse},
		{"a cost over the limit is refused, whatever the store said", limiter.Decision{Allowed: true}, fmt.Errorf("cost 11: %w", limiter.ErrCostExceedsLimit), false,
			VerdictRejected, limiter.StatusRejected, refuse},
		{"a shadow limit over passes without headers", limiter.Decision{}, nil, true,
			VerdictShadowClassOver, limiter.StatusShadowRejected, pass},
		{"a shadow limit under passes with its headers", limiter.Decision{Allowed: true}, nil, true,
			VerdictAllowed, limiter.StatusAllowed, passLimited},
		{"a fail-open decision passes without headers", limiter.Decision{Allowed: true, Failure: limiter.FailureOpen}, storeDown, false,
			VerdictFailOpen, limiter.StatusFailOpen, pass},
		{"a fail-closed decision is answered 503", limiter.Decision{Failure: limiter.FailureClosed}, storeDown, false,
			VerdictFailClosed, limiter.StatusFailClosed, unavailable},
		{"a shadow limit fails open even under a closed policy", limiter.Decision{Failure: limiter.FailureClosed}, storeDown, true,
			VerdictFailOpen, limiter.StatusFailOpen, pass},
		{"a degraded decision counts as what it decided", limiter.Decision{Failure: limiter.FailureLocal}, storeDown, false,
			VerdictRejected, limiter.StatusRejected, refuse},
		{"a cancelled caller gets nothing", limiter.Decision{Failure: limiter.FailureCanceled}, errors.New("context canceled"), false,
			VerdictCanceled, limiter.StatusCanceled, drop},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := Judge(c.d, c.err, lim, c.shadow)
			if o.Verdict != c.want || o.Status() != c.wantStatus || answerOf(o.Verdict) != c.wantAnswer {
				t.Errorf("verdict %d, status %s, answer %s; want %d, %s, %s", o.Verdict, o.Status(), answerOf(o.Verdict), c.want, c.wantStatus, c.wantAnswer)
			}
			if errors.Is(c.err, limiter.ErrCostExceedsLimit) && (o.Decision.Allowed || o.Decision.RetryAfter != lim.Window()) {
				t.Errorf("decision %+v: a cost no limit admits is refused, to retry in one window", o.Decision)
			}
		})
	}
}

func TestTheRecordCarriesTheErrorOnlyOfFailedAndDegradedDecisions(t *testing.T) {
	lim := limiter.PerMinute(limiter.FixedWindow, 10)
	storeDown := errors.New("store down")
	cases := []struct {
		name    string
		o       Outcome
		wantErr bool
	}{
		{"fail-open", Judge(limiter.Decision{Allowed: true, Failure: limiter.FailureOpen}, storeDown, lim, false), true},
		{"fail-closed", Judge(limiter.Decision{Failure: limiter.FailureClosed}, storeDown, lim, false), true},
		{"degraded", Judge(limiter.Decision{Allowed: true, Failure: limiter.FailureLocal}, storeDown, lim, false), true},
		{"a cost no limit admits", Judge(limiter.Decision{}, limiter.ErrCostExceedsLimit, lim, false), false},
		{"cancelled", Judge(limiter.Decision{Failure: limiter.FailureCanceled}, storeDown, lim, false), false},
	}
	for _, c := range cases {
		o := c.o
		o.Endpoint, o.Tier, o.Key, o.Limit = "/x", "free", "ip:1", lim
		rec := o.Recorded()
		if (rec.Err != nil) != c.wantErr || rec.Status != c.o.Status() {
			t.Errorf("%s: record %+v, want an error: %v", c.name, rec, c.wantErr)
		}
	}
}

func TestRolloutBucketIsPinned(t *testing.T) {
	// A change here would move clients between buckets on upgrade, and
	// instances of two releases would disagree during a rolling deploy.
	for key, want := range map[string]int{"user:alice": 17, "ip:192.0.2.1": 88, "": 3} {
		if got := RolloutBucket(key); got != want {
			t.Errorf("RolloutBucket(%q) = %d, want %d", key, got, want)
		}
	}
}

// Every verdict is recorded under a status the collector counts (it has an Index), or under
// canceled, which is counted apart: a verdict added with a status of its own needs that status
// in limiter's list.
func TestEveryVerdictIsRecordedUnderACountedStatus(t *testing.T) {
	for v := VerdictAllowed; v <= VerdictShadowLimitOver; v++ {
		s := v.Status()
		if _, ok := s.Index(); !ok && s != limiter.StatusCanceled {
			t.Errorf("verdict %d is recorded as %q, which no counter counts", v, s)
		}
	}
	if s := Verdict(VerdictShadowLimitOver + 1).Status(); s != "" {
		t.Errorf("a verdict past the last is recorded as %q; the test above misses one", s)
	}
}
