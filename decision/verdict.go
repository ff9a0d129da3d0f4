// Package decision is the decision model every way in shares (httplimit's middleware and
// decision API, rls's Envoy service, serve's proxy): Ask, Verdict, live limits, header fields.
// It knows no transport; its values are plain and its functions safe for concurrent use.
package decision

import (
	"context"
	"errors"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// Verdict is how a way in answers one decision, read by the ways in (Refuses, Limited, Drops);
// its Status is the label the decision is recorded under: VerdictShadowClassOver and
// VerdictLiveShadowOver share shadow_rejected.
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
	// VerdictShadowLimitOver: of several limits (Ask.Set), a shadow one would refuse while the
	// enforced ones admit; answered as allowed, with the enforced limits' headers.
	VerdictShadowLimitOver
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
	VerdictShadowLimitOver: {limiter.StatusShadowRejected, false, true},
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

// Outcome is one decision judged, or one settle, charge, release or renewal of what a decision
// holds (Op), a plain value holding all recording and tracing need: its Ask, Verdict, Err and the
// Decision of Limit (for a cost no window admits, a refusal for a window).
type Outcome struct {
	Ask
	Op       Op // OpDecide for Decide and Judge
	Verdict  Verdict
	Decision limiter.Decision
	Err      error
	Limit    limiter.Limit
	// Reservation is what a limiter.ModeReserve ask opened: ID "" when nothing was (refused, shadow over,
	// the fail policy's), so that settling it does nothing.
	Reservation limiter.Reservation
	Lease       limiter.Lease         // what a limiter.ModeLease ask took: ID "" when nothing was
	Leased      limiter.LeaseDecision // the concurrency limit's answer to a limiter.ModeLease ask
	// Of the other ops: Reservation and Lease are what they acted on (Ask's), Settlement what a
	// settle or charge did and Renewal what a renewal did, as the store answered.
	Settlement limiter.Settlement
	Renewal    limiter.Renewal
	// Parts, for an Ask of several limits (Ask.Set), is each limit's answer: the enforced ones
	// in SetAsk.Parts' order, then the shadow ones decided. Decision and Limit are then those of
	// the limit the answer speaks for: a refusing one with the longest RetryAfter (every
	// refusing limit admits again by then), else the one with the least Remaining ÷ quota.
	Parts []PartOutcome
	// RefusedBy names the enforced limits that refused a request of several (nil otherwise, and
	// when the store failed); for a cost no window admits, those it exceeds.
	RefusedBy []string
	// Speaker names the limit of several whose Decision and Limit these are.
	Speaker string
}

// Status is the status the outcome is recorded with.
func (o Outcome) Status() limiter.Status { return o.Verdict.Status() }

// Recorded is what a Recorder is told of the outcome; its Err is set for store failures only,
// its RefusedBy is the outcome's (the limits of several that refused).
func (o Outcome) Recorded() limiter.Record {
	rec := limiter.Record{Endpoint: o.Endpoint, PlanTier: o.Tier, Key: o.Key, Limit: o.Limit, Status: o.Status(), Decision: o.Decision,
		RefusedBy: o.RefusedBy}
	if o.Verdict == VerdictFailOpen || o.Verdict == VerdictFailClosed || o.Decision.Failure == limiter.FailureLocal {
		rec.Err = o.Err
	}
	return rec
}

// EndTrace ends the span that end (from TraceFunc.Start; nil: none) belongs to with o.
func (o Outcome) EndTrace(end func(limiter.Status, limiter.Decision, error)) {
	if end != nil {
		end(o.Status(), o.Decision, o.Err)
	}
}

// Judge gives the verdict on what a limiter of lim answered; shadow never refuses, even fail-closed.
func Judge(d limiter.Decision, err error, lim limiter.Limit, shadow bool) Outcome {
	var o Outcome
	o.judge(d, err, lim, shadow)
	return o
}

// judge is Judge in place, so that Decide copies no Outcome.
func (o *Outcome) judge(d limiter.Decision, err error, lim limiter.Limit, shadow bool) {
	o.Decision, o.Err, o.Limit = d, err, lim
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
}

// ShadowSuffix ends a shadow live change's store key, apart from the enforced limit's state.
const ShadowSuffix = "|shadow"

// Mode is what an Ask takes from its limit.
//
// Deprecated: use limiter.Mode, the one set of modes.
type Mode = limiter.Mode

const (
	// ModeConsume takes Cost now.
	//
	// Deprecated: use limiter.ModeConsume.
	ModeConsume = limiter.ModeConsume
	// ModeDryRun is whether Cost would pass now; nothing is taken.
	//
	// Deprecated: use limiter.ModePeek.
	ModeDryRun = limiter.ModePeek
	// ModeReserve holds Cost, an estimate, in a reservation settled at the real cost.
	//
	// Deprecated: use limiter.ModeReserve.
	ModeReserve = limiter.ModeReserve
	// ModeLease holds one of Leases' slots until it is released; Cost is unused.
	//
	// Deprecated: use limiter.ModeLease.
	ModeLease = limiter.ModeLease
)

// Ask is one decision for Decide, a plain value: Cost units of Key from Limiter in Mode (consume,
// peek, at most, reserve; limiter.ModeLease: a slot of Leases) under Endpoint and Tier. LiveShadow, asked on Key+ShadowSuffix when Limiter admits,
// makes VerdictAllowed VerdictLiveShadowOver when it would refuse. Shadow refuses nothing.
type Ask struct {
	Endpoint   string // the decision's class in metrics and spans: a route pattern, a rule's path
	Tier       string // the plan tier applied
	Key        string // the store key
	Cost       int64
	Mode       limiter.Mode
	Shadow     bool
	Limiter    *limiter.Limiter
	LiveShadow *limiter.Limiter
	Leases     *limiter.Leases
	// What Settle, Charge, Release and Renew act on: a reservation a ModeReserve ask opened, a
	// lease a ModeLease ask took (Decide ignores them).
	Reservation limiter.Reservation
	Lease       limiter.Lease
	// Unknown is why a settle's real cost is unknown (CostMissing and the others), "" when Cost
	// is it: the reservation is then committed at its estimate.
	Unknown string
	// FromToken says Reservation or Lease is a caller's token, not this instance's own hold: its
	// figures count only as far as the store confirms them.
	FromToken bool
	// Set, when set, decides several limits as one in place of Limiter (ModeConsume or
	// ModePeek; Key and Cost are then the parts'): see SetAsk.
	Set *SetAsk
}

// Decide asks for a and judges the answer.
func Decide(ctx context.Context, a Ask) Outcome {
	var o Outcome
	DecideInto(ctx, &a, &o)
	return o
}

// DecideInto is Decide answering in *o, which it overwrites whole, for a way in that keeps the
// Outcome in a larger value of its own: an Outcome is hundreds of bytes, and the copies of one
// returned and assigned cost a request path as much as its limiter's answer. a is read only.
func DecideInto(ctx context.Context, a *Ask, o *Outcome) {
	*o = Outcome{Ask: *a}
	if a.Set != nil {
		o.decideSet(ctx, *a)
		return
	}
	switch a.Mode {
	case limiter.ModePeek:
		d, err := a.Limiter.PeekN(ctx, a.Key, a.Cost)
		o.judge(d, err, a.Limiter.Limit(), a.Shadow)
	case limiter.ModeAtMost:
		d, err := a.Limiter.AllowAtMost(ctx, a.Key, a.Cost)
		o.judge(d, err, a.Limiter.Limit(), a.Shadow)
	case limiter.ModeLease:
		lease, ld, err := a.Leases.Acquire(ctx, a.Key)
		d := limiter.Decision{Allowed: ld.Allowed, Limit: ld.Limit, Remaining: ld.Remaining(), RetryAfter: ld.RetryAfter, Failure: ld.Failure}
		if ld.Allowed {
			d.Admitted = 1
		}
		o.judge(d, err, limiter.Limit{Algorithm: limiter.Concurrency, Rate: ld.Limit}, a.Shadow)
		o.Lease, o.Leased = lease, ld
	case limiter.ModeReserve:
		var d limiter.Decision
		var err error
		o.Reservation, d, err = a.Limiter.Reserve(ctx, a.Key, a.Cost)
		o.judge(d, err, a.Limiter.Limit(), a.Shadow)
	default:
		d, err := a.Limiter.AllowN(ctx, a.Key, a.Cost)
		o.judge(d, err, a.Limiter.Limit(), a.Shadow)
	}
	if o.Verdict == VerdictAllowed && a.LiveShadow != nil && !a.Shadow && a.Mode != limiter.ModePeek {
		if sd, serr := a.LiveShadow.AllowN(ctx, a.Key+ShadowSuffix, a.Cost); serr == nil && !sd.Allowed {
			o.Verdict = VerdictLiveShadowOver
		}
	}
}

// TraceFunc starts one decision's span, returning the context to decide with (so that the store's
// spans belong to it) and the function ending it with the outcome. Safe for concurrent use.
type TraceFunc func(ctx context.Context, endpoint, planTier string, algorithm limiter.Algorithm) (context.Context, func(limiter.Status, limiter.Decision, error))

// Start begins a's span on lim (a.Limiter's, unless a way in judges without one) for
// Outcome.EndTrace to end; a nil t starts nothing.
func (t TraceFunc) Start(ctx context.Context, a Ask, lim limiter.Limit) (context.Context, func(limiter.Status, limiter.Decision, error)) {
	if t == nil {
		return ctx, nil
	}
	return t(ctx, a.Endpoint, a.Tier, lim.Algorithm)
}
