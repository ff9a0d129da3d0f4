package httplimit

import (
	"context"
	"errors"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// Verdict is what one decision means, with exactly one meaning per value.
// Every way in — the middleware, the decision API (/v1/check, dry runs
// included) and Envoy's rate limit service — gets its verdict from Judge
// or Decide, and reads from it the status it records (Status) and what it
// does with the request (Action), so they all answer alike. The zero
// value is no verdict.
//
// Two verdicts share the recorded status shadow_rejected, a public
// metric label value, and mean different things:
//   - VerdictShadowClassOver: the limit is in shadow mode (a shadow class
//     or rule) and is over; no limit is enforced, so the request passes
//     with no rate-limit headers.
//   - VerdictLiveShadowOver: the enforced limit admitted the request and a
//     live change run in shadow beside it would have refused; the request
//     passes with the enforced limit's headers and leaky-bucket delay.
type Verdict uint8

// The verdicts.
const (
	// VerdictAllowed: the limit admitted the request (status allowed).
	VerdictAllowed Verdict = iota + 1
	// VerdictRejected: the enforced limit refused the request, or its cost
	// is one the limit can never admit (status rejected).
	VerdictRejected
	// VerdictShadowClassOver: a limit in shadow mode is over; nothing is
	// enforced (status shadow_rejected).
	VerdictShadowClassOver
	// VerdictLiveShadowOver: the enforced limit admitted the request; a
	// live change in shadow would have refused it (status shadow_rejected).
	VerdictLiveShadowOver
	// VerdictFailOpen: the store failed and the fail policy lets the
	// request through, as it does for a limit in shadow mode whatever the
	// policy (status fail_open).
	VerdictFailOpen
	// VerdictFailClosed: the store failed and the fail policy refuses the
	// request (status fail_closed).
	VerdictFailClosed
	// VerdictCanceled: the caller went away while the store decided;
	// nobody is left to answer (status canceled).
	VerdictCanceled
)

// Action is what a way in does with a request, given its Verdict.
type Action uint8

// The actions.
const (
	// ActionDrop: nothing is written; the caller is gone.
	ActionDrop Action = iota
	// ActionPass: the request passes without rate-limit headers, as no
	// enforced limit decided it (a failed store, or a limit in shadow
	// mode over its limit).
	ActionPass
	// ActionPassLimited: the request passes with the headers of the limit
	// that admitted it, after its leaky-bucket delay.
	ActionPassLimited
	// ActionRefuse: 429 with the limit's headers and Retry-After (Envoy:
	// OVER_LIMIT).
	ActionRefuse
	// ActionUnavailable: 503 with Retry-After (Envoy: OVER_LIMIT).
	ActionUnavailable
)

// verdicts is the one table from a verdict to its status and action.
var verdicts = [...]struct {
	status limiter.Status
	action Action
}{
	VerdictAllowed:         {limiter.StatusAllowed, ActionPassLimited},
	VerdictRejected:        {limiter.StatusRejected, ActionRefuse},
	VerdictShadowClassOver: {limiter.StatusShadowRejected, ActionPass},
	VerdictLiveShadowOver:  {limiter.StatusShadowRejected, ActionPassLimited},
	VerdictFailOpen:        {limiter.StatusFailOpen, ActionPass},
	VerdictFailClosed:      {limiter.StatusFailClosed, ActionUnavailable},
	VerdictCanceled:        {limiter.StatusCanceled, ActionDrop},
}

// Status is the status the verdict is recorded with.
func (v Verdict) Status() limiter.Status {
	if int(v) >= len(verdicts) {
		return ""
	}
	return verdicts[v].status
}

// Action is what a way in does with the request.
func (v Verdict) Action() Action {
	if int(v) >= len(verdicts) {
		return ActionDrop
	}
	return verdicts[v].action
}

// Refuses reports whether the request is refused (429 or 503; Envoy's
// OVER_LIMIT).
func (v Verdict) Refuses() bool {
	a := v.Action()
	return a == ActionRefuse || a == ActionUnavailable
}

// Outcome is one decision judged: the limiter's answer and its verdict.
// It is a plain value.
type Outcome struct {
	// Verdict is what the decision means.
	Verdict Verdict
	// Decision is the enforced limit's answer; for a cost the limit can
	// never admit, a refusal with RetryAfter one window.
	Decision limiter.Decision
	// Err is the limiter's error: a store failure behind a fail-open,
	// fail-closed or degraded decision, a cancellation, or a cost the
	// limit can never admit.
	Err error
}

// Status is the status the outcome is recorded with.
func (o Outcome) Status() limiter.Status { return o.Verdict.Status() }

// Record is the record of the outcome for a Recorder. Its Err is the
// store error behind a fail-open, fail-closed or degraded decision only.
func (o Outcome) Record(endpoint, planTier, key string, lim limiter.Limit) limiter.Record {
	rec := limiter.Record{Endpoint: endpoint, PlanTier: planTier, Key: key, Limit: lim, Status: o.Status(), Decision: o.Decision}
	if o.Verdict == VerdictFailOpen || o.Verdict == VerdictFailClosed || o.Decision.Failure == limiter.FailureLocal {
		rec.Err = o.Err
	}
	return rec
}

// Judge gives the verdict on what a limiter of lim answered (d, err). A
// limit in shadow mode (shadow) never refuses, not even when the store is
// down and the fail policy is closed. Judge never asks a live change in
// shadow: only Decide does.
func Judge(d limiter.Decision, err error, lim limiter.Limit, shadow bool) Outcome {
	o := Outcome{Decision: d, Err: err}
	switch {
	case err != nil && (errors.Is(err, limiter.ErrCostExceedsLimit) || errors.Is(err, limiter.ErrInvalidCost)):
		// A cost the limit can never admit: refused, never passed on.
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

// ShadowSuffix ends the store key of a live change run in shadow, keeping
// its state apart from that of the limit enforced on the same client.
const ShadowSuffix = "|shadow"

// Ask is one decision for Decide to make. It is a plain value.
type Ask struct {
	// Limiter is the limit that decides: the enforced one, or one in
	// shadow mode when Shadow is set.
	Limiter *limiter.Limiter
	// Shadow says the limit is in shadow mode: it never refuses.
	Shadow bool
	// LiveShadow, when set, is a live change run in shadow beside an
	// enforced Limiter, on its own state (Key + ShadowSuffix): asked only
	// when the enforced limit admits, it turns VerdictAllowed into
	// VerdictLiveShadowOver when it would have refused.
	LiveShadow *limiter.Limiter
	// Key and Cost are what the limiter is asked for.
	Key  string
	Cost int64
}

// Decide asks a.Limiter for a.Cost units of a.Key and judges the answer
// (see Judge), asking a live change in shadow too when there is one. Safe
// for concurrent use, as the limiters are.
func Decide(ctx context.Context, a Ask) Outcome {
	d, err := a.Limiter.AllowN(ctx, a.Key, a.Cost)
	o := Judge(d, err, a.Limiter.Limit(), a.Shadow)
	if o.Verdict == VerdictAllowed && a.LiveShadow != nil && !a.Shadow {
		// What the change would have refused is counted, not refused.
		if sd, serr := a.LiveShadow.AllowN(ctx, a.Key+ShadowSuffix, a.Cost); serr == nil && !sd.Allowed {
			o.Verdict = VerdictLiveShadowOver
		}
	}
	return o
}
