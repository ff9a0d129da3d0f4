// Package decision is the decision model every way in to the limiter
// shares — the HTTP middleware and decision API (httplimit), Envoy's rate
// limit service (rls) and serve's proxy: what is asked (Ask), what the
// answer means (Verdict, Outcome), which limit a live change puts in force
// for a client (LiveLimit, Live), and how a limit is rendered into the
// rate-limit header fields (HeaderConfig, RenderedLimit, Fields).
//
// It knows the limiter and nothing of transports: no net/http, no gRPC,
// no Prometheus. Everything in it is a plain value or a pure function, safe
// for concurrent use unless said otherwise.
package decision

import (
	"context"
	"errors"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// Verdict is what one decision means, one meaning per value; every way in
// reads from it the status it records (Status) and how it answers
// (Refuses, Limited, Drops). The zero value is no verdict.
//
// limiter.Failure says how the limiter answered without the store, and
// limiter.Status is the label a verdict is recorded under: two verdicts,
// VerdictShadowClassOver and VerdictLiveShadowOver, share the label
// shadow_rejected yet answer differently.
type Verdict uint8

// The verdicts.
const (
	// VerdictAllowed: the limit admitted the request; it passes with the
	// limit's headers, after its leaky-bucket delay.
	VerdictAllowed Verdict = iota + 1
	// VerdictRejected: the enforced limit refused the request, or its cost
	// is one the limit can never admit: 429 (Envoy: OVER_LIMIT).
	VerdictRejected
	// VerdictShadowClassOver: a limit in shadow mode is over; nothing is
	// enforced, so the request passes without rate-limit headers.
	VerdictShadowClassOver
	// VerdictLiveShadowOver: the enforced limit admitted the request and a
	// live change run in shadow beside it would have refused; it passes
	// with the enforced limit's headers and delay.
	VerdictLiveShadowOver
	// VerdictFailOpen: the store failed and the fail policy (or a limit in
	// shadow mode, whatever the policy) lets the request through without
	// rate-limit headers.
	VerdictFailOpen
	// VerdictFailClosed: the store failed and the fail policy refuses: 503
	// with Retry-After (Envoy: OVER_LIMIT).
	VerdictFailClosed
	// VerdictCanceled: the caller went away while the store decided;
	// nothing is answered.
	VerdictCanceled
)

// verdicts is the one table from a verdict to its status and answer.
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
}

func (v Verdict) known() bool { return v > 0 && int(v) < len(verdicts) }

// Status is the status the verdict is recorded with.
func (v Verdict) Status() limiter.Status {
	if !v.known() {
		return ""
	}
	return verdicts[v].status
}

// Refuses reports whether the request is refused: 429 or 503, Envoy's
// OVER_LIMIT.
func (v Verdict) Refuses() bool { return v.known() && verdicts[v].refuses }

// Limited reports whether the answer carries the headers of the limit that
// decided (and, when it passes, waits its leaky-bucket delay).
func (v Verdict) Limited() bool { return v.known() && verdicts[v].limited }

// Drops reports whether nothing is to be answered: the caller is gone.
func (v Verdict) Drops() bool { return !v.known() || v == VerdictCanceled }

// Outcome is one decision judged: the limiter's answer and its verdict.
type Outcome struct {
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

// Record is the outcome as a Recorder takes it. Its Err is the store error
// behind a fail-open, fail-closed or degraded decision only: a refused
// cost or a cancellation is no store failure.
func (o Outcome) Record(endpoint, planTier, key string, lim limiter.Limit) limiter.Record {
	rec := limiter.Record{Endpoint: endpoint, PlanTier: planTier, Key: key, Limit: lim, Status: o.Status(), Decision: o.Decision}
	if o.Verdict == VerdictFailOpen || o.Verdict == VerdictFailClosed || o.Decision.Failure == limiter.FailureLocal {
		rec.Err = o.Err
	}
	return rec
}

// Judge gives the verdict on what a limiter of lim answered (d, err). A
// limit in shadow mode never refuses, not even when the store is down and
// the fail policy is closed. Judge never asks a live change in shadow:
// Decide does.
func Judge(d limiter.Decision, err error, lim limiter.Limit, shadow bool) Outcome {
	o := Outcome{Decision: d, Err: err}
	switch {
	case err != nil && (errors.Is(err, limiter.ErrCostExceedsLimit) || errors.Is(err, limiter.ErrInvalidCost)):
		// Refused, never passed on: no window admits it.
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

// Ask is one decision for Decide to make.
type Ask struct {
	// Limiter is the limit that decides: the enforced one, or one in
	// shadow mode when Shadow is set.
	Limiter *limiter.Limiter
	// LiveShadow, when set, is a live change run in shadow beside an
	// enforced Limiter on its own state (Key + ShadowSuffix): asked only
	// when the enforced limit admits, it turns VerdictAllowed into
	// VerdictLiveShadowOver when it would have refused.
	LiveShadow *limiter.Limiter
	// Key and Cost are what the limiter is asked for.
	Key  string
	Cost int64
	// Shadow says the limit is in shadow mode: it never refuses.
	Shadow bool
	// DryRun peeks (limiter.PeekN): nothing is taken and no live change
	// in shadow is asked.
	DryRun bool
}

// Decide asks a.Limiter for a.Cost units of a.Key and judges the answer
// (see Judge), asking a live change in shadow too when there is one. Safe
// for concurrent use, as the limiters are.
func Decide(ctx context.Context, a Ask) Outcome {
	if a.DryRun {
		d, err := a.Limiter.PeekN(ctx, a.Key, a.Cost)
		return Judge(d, err, a.Limiter.Limit(), a.Shadow)
	}
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

// TraceFunc starts the trace of one decision. It is called before the
// limiter with the request's context and returns the context to decide
// with — carrying the decision's span, so that the store's spans and the
// latency exemplar belong to it — and the function to call once with the
// outcome, which ends the span. serve builds one from a tracing.Provider.
// Implementations must be safe for concurrent use.
type TraceFunc func(ctx context.Context, endpoint, planTier string, algorithm limiter.Algorithm) (context.Context, func(limiter.Status, limiter.Decision, error))
