// Package decision is the decision model every way in shares (httplimit's middleware and
// decision API, rls's Envoy service, serve's proxy): Ask, Verdict, live limits, header fields.
// It knows no transport; its values are plain and its functions safe for concurrent use.
package decision

import (
	"context"
	"errors"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// Verdict is what one decision means and how every way in answers it. Its Status is the label
// it is recorded under: VerdictShadowClassOver and VerdictLiveShadowOver share shadow_rejected.
type Verdict uint8

// The verdicts, and how each is answered.
const (
	VerdictAllowed         Verdict = iota + 1 // passes with the limit's headers, after its delay
	VerdictRejected                           // refused, or a cost no window admits: 429, OVER_LIMIT
	VerdictShadowClassOver                    // a shadow limit is over: passes without headers
	VerdictLiveShadowOver                     // a live change in shadow would refuse; answered as allowed
	VerdictFailOpen                           // the store failed: passes without headers
	VerdictFailClosed                         // the store failed: 503 with Retry-After, OVER_LIMIT
	VerdictCanceled                           // the caller went away: nothing is answered
	VerdictPenalized                          // the key is in its penalty box: 429 until it opens
)

var verdicts = [...]struct {
	status  limiter.Status
	refuses bool
	limited bool
}{
	VerdictAllowed:         {limiter.StatusAllowed, false, true},
	VerdictRejected:        {limiter.StatusRejected, true, true},
	VerdictShadowClassOver: {limiter.StatusShadowRejected, false, false},
	VerdictLiveShadowOver:  {limiter.StatusShadowRejected, false, true},
	VerdictFailOpen:        {limiter.StatusFailOpen, false, false},
	VerdictFailClosed:      {limiter.StatusFailClosed, true, false},
	VerdictCanceled:        {limiter.StatusCanceled, false, false},
	VerdictPenalized:       {limiter.StatusPenalized, true, true},
}

func (v Verdict) known() bool { return v > 0 && int(v) < len(verdicts) }

// Status is the status the verdict is recorded with.
func (v Verdict) Status() limiter.Status {
	if !v.known() {
		return ""
	}
	return verdicts[v].status
}

// Refuses reports a 429 or 503 (Envoy: OVER_LIMIT).
func (v Verdict) Refuses() bool { return v.known() && verdicts[v].refuses }

// Limited reports an answer with the deciding limit's headers (and delay).
func (v Verdict) Limited() bool { return v.known() && verdicts[v].limited }

// Drops reports that nobody is left to answer.
func (v Verdict) Drops() bool { return !v.known() || v == VerdictCanceled }

// Outcome is one decision judged: its Verdict, the enforced limit's Decision (for a cost no
// window admits, a refusal to retry in one window) and the limiter's Err.
type Outcome struct {
	Verdict  Verdict
	Decision limiter.Decision
	Err      error
	// Reservation is what a Reserve ask opened: ID "" when nothing was (refused, shadow over,
	// the fail policy's), so that settling it does nothing.
	Reservation limiter.Reservation
}

// Status is the status the outcome is recorded with.
func (o Outcome) Status() limiter.Status { return o.Verdict.Status() }

// Record is the outcome for a Recorder; its Err is set for store failures only.
func (o Outcome) Record(endpoint, planTier, key string, lim limiter.Limit) limiter.Record {
	rec := limiter.Record{Endpoint: endpoint, PlanTier: planTier, Key: key, Limit: lim, Status: o.Status(), Decision: o.Decision}
	if o.Verdict == VerdictFailOpen || o.Verdict == VerdictFailClosed || o.Decision.Failure == limiter.FailureLocal {
		rec.Err = o.Err
	}
	return rec
}

// Judge gives the verdict on what a limiter of lim answered; shadow never refuses, even fail-closed.
func Judge(d limiter.Decision, err error, lim limiter.Limit, shadow bool) Outcome {
	o := Outcome{Decision: d, Err: err}
	switch {
	case err != nil && (errors.Is(err, limiter.ErrCostExceedsLimit) || errors.Is(err, limiter.ErrInvalidCost)):
		o.Decision.Allowed = false
		o.Decision.RetryAfter = lim.Window()
		o.Verdict = VerdictRejected
	case d.Failure == limiter.FailureCanceled:
		o.Verdict = VerdictCanceled
	case d.Failure == limiter.FailureOpen:
		o.Verdict = VerdictFailOpen
	case d.Failure == limiter.FailureClosed && shadow:
		o.Verdict = VerdictFailOpen
	case d.Failure == limiter.FailureClosed:
		o.Verdict = VerdictFailClosed
	case d.Allowed:
		o.Verdict = VerdictAllowed
	case shadow:
		o.Verdict = VerdictShadowClassOver
	default:
		o.Verdict = VerdictRejected
	}
	return o
}

// ShadowSuffix ends a shadow live change's store key, apart from the enforced limit's state.
const ShadowSuffix = "|shadow"

// Ask is one decision for Decide: Cost units of Key from Limiter. LiveShadow, asked on
// Key+ShadowSuffix when Limiter admits, turns VerdictAllowed into VerdictLiveShadowOver when it
// would refuse. With Shadow, Limiter never refuses; with DryRun, Decide peeks and takes nothing;
// with Reserve, Cost is an estimate held in a reservation to settle at the real cost.
type Ask struct {
	Limiter        *limiter.Limiter
	LiveShadow     *limiter.Limiter
	Key            string
	Cost           int64
	Shadow, DryRun bool
	Reserve        bool
}

// Decide asks a.Limiter for a.Cost units of a.Key and judges the answer.
func Decide(ctx context.Context, a Ask) Outcome {
	if a.DryRun {
		d, err := a.Limiter.PeekN(ctx, a.Key, a.Cost)
		return Judge(d, err, a.Limiter.Limit(), a.Shadow)
	}
	var res limiter.Reservation
	var d limiter.Decision
	var err error
	if a.Reserve {
		res, d, err = a.Limiter.Reserve(ctx, a.Key, a.Cost)
	} else {
		d, err = a.Limiter.AllowN(ctx, a.Key, a.Cost)
	}
	o := Judge(d, err, a.Limiter.Limit(), a.Shadow)
	o.Reservation = res
	if o.Verdict == VerdictAllowed && a.LiveShadow != nil && !a.Shadow {
		if sd, serr := a.LiveShadow.AllowN(ctx, a.Key+ShadowSuffix, a.Cost); serr == nil && !sd.Allowed {
			o.Verdict = VerdictLiveShadowOver
		}
	}
	return o
}

// TraceFunc starts one decision's span, returning the context to decide with (so that the store's
// spans belong to it) and the function ending it with the outcome. Safe for concurrent use.
type TraceFunc func(ctx context.Context, endpoint, planTier string, algorithm limiter.Algorithm) (context.Context, func(limiter.Status, limiter.Decision, error))
