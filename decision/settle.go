package decision

import (
	"context"
	"errors"
	"sync"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// Op is what a way in asked of the store: a decision, or a call that ends or extends what a
// decision holds. Every Op gives an Outcome, traced and recorded alike (Reporter), so that no way
// in keeps metrics of its own.
type Op uint8

// The ops, each with the function that makes its Outcome.
const (
	OpDecide  Op = iota // Decide: a decision of Ask.Mode
	OpCommit            // Settle: Ask.Reservation committed at Ask.Cost
	OpCancel            // Settle, cancelling: Ask.Reservation's whole estimate given back
	OpCharge            // Charge: Ask.Cost of a request served, taken even past the limit
	OpRelease           // Release: Ask.Lease given back
	OpRenew             // Renew: Ask.Reservation's hold or Ask.Lease's TTL extended
)

var opNames = [...]string{"decide", "commit", "cancel", "charge", "release", "renew"}

// String is the op's name, as logs give it.
func (op Op) String() string {
	if int(op) < len(opNames) {
		return opNames[op]
	}
	return "unknown"
}

// Settle commits a.Reservation (opened by a ModeReserve Decide, or named by a caller's token) on
// a.Limiter at a.Cost or, with cancel, gives its whole estimate back. A non-empty a.Unknown (one
// of the Cost* reasons) says the real cost is unknown: it is committed at its estimate, held to
// the quota. The verdict is how a way in answers the settle: VerdictAllowed when the store settled
// it (Settlement; on time or late, as Settlement.Late says), VerdictRejected when the store holds
// no such reservation, VerdictFailClosed when the store failed (the reservation then expires by
// its policy), VerdictCanceled when ctx ended first. Safe for concurrent use.
func Settle(ctx context.Context, a Ask, cancel bool) Outcome {
	o := Outcome{Ask: a, Op: OpCommit, Limit: a.Limiter.Limit(), Reservation: a.Reservation}
	var err error
	switch {
	case cancel:
		o.Op = OpCancel
		o.Settlement, err = a.Limiter.Cancel(ctx, a.Reservation)
	case a.Unknown != "":
		o.Settlement, err = a.Limiter.Commit(ctx, a.Reservation, min(a.Reservation.Estimate, o.Limit.Quota()))
	default:
		o.Settlement, err = a.Limiter.Commit(ctx, a.Reservation, a.Cost)
	}
	o.held(err, limiter.ErrReservationUnknown)
	return o
}

// SettleAsync is Settle for a caller that does not wait for the answer (a proxy settling after
// its response): on a store that settles without waiting (limiter.AsyncSettler, such as Redis's)
// the settle joins the store's next batch and SettleAsync returns at once; then gets the Outcome
// Settle would have returned, once, on a goroutine of the store's (it must not block), or on the
// caller's on other stores. Safe for concurrent use.
func SettleAsync(ctx context.Context, a Ask, cancel bool, then func(Outcome)) {
	o := Outcome{Ask: a, Op: OpCommit, Limit: a.Limiter.Limit(), Reservation: a.Reservation}
	done := func(s limiter.Settlement, err error) {
		o.Settlement = s
		o.held(err, limiter.ErrReservationUnknown)
		then(o)
	}
	switch {
	case cancel:
		o.Op = OpCancel
		a.Limiter.CancelAsync(ctx, a.Reservation, done)
	case a.Unknown != "":
		a.Limiter.CommitAsync(ctx, a.Reservation, min(a.Reservation.Estimate, o.Limit.Quota()), done)
	default:
		a.Limiter.CommitAsync(ctx, a.Reservation, a.Cost, done)
	}
}

// Charge takes a.Cost of a request already served (Envoy's charge at stream done): it commits
// the one-unit reservation a.Reservation opened at admission at a.Cost or, where the budget was
// too spent to open one (a.Reservation.ID ""), charges a.Key past the limit, so that the next
// admissions wait for the debt. Verdicts as Settle's. Safe for concurrent use.
func Charge(ctx context.Context, a Ask) Outcome {
	o := Outcome{Ask: a, Op: OpCharge, Limit: a.Limiter.Limit(), Reservation: a.Reservation}
	var err error
	if a.Reservation.ID != "" {
		o.Settlement, err = a.Limiter.Commit(ctx, a.Reservation, a.Cost)
	} else {
		o.Settlement, err = a.Limiter.Charge(ctx, a.Key, a.Cost)
	}
	o.held(err, limiter.ErrReservationUnknown)
	return o
}

// Release gives a.Lease back to a.Leases; Leased.Expired counts the key's leases the store found
// past their TTL meanwhile. VerdictRejected: the store held no such lease (released already,
// expired, or never taken). Otherwise as Settle. Safe for concurrent use.
func Release(ctx context.Context, a Ask) Outcome {
	o := Outcome{Ask: a, Op: OpRelease, Limit: leaseLimit(a.Leases), Lease: a.Lease}
	var err error
	o.Leased.Expired, err = a.Leases.Release(ctx, a.Lease)
	o.held(err, limiter.ErrLeaseUnknown)
	return o
}

// Renew extends a.Lease's TTL on a.Leases when a.Leases is set, else a.Reservation's hold on
// a.Limiter, answering the new end in Renewal. Verdicts as Release's and Settle's. Safe for
// concurrent use.
func Renew(ctx context.Context, a Ask) Outcome {
	o := Outcome{Ask: a, Op: OpRenew, Reservation: a.Reservation, Lease: a.Lease}
	var err error
	if a.Leases != nil {
		o.Limit = leaseLimit(a.Leases)
		o.Renewal, err = a.Leases.Renew(ctx, a.Lease)
		o.held(err, limiter.ErrLeaseUnknown)
		return o
	}
	o.Limit = a.Limiter.Limit()
	o.Renewal, err = a.Limiter.Renew(ctx, a.Reservation)
	o.held(err, limiter.ErrReservationUnknown)
	return o
}

func leaseLimit(ls *limiter.Leases) limiter.Limit {
	return limiter.Limit{Algorithm: limiter.Concurrency, Rate: ls.Limit().Limit}
}

// held judges the store's answer to a call on something held, unknown being its error for
// nothing held under the name.
func (o *Outcome) held(err, unknown error) {
	o.Err = err
	switch {
	case err == nil || errors.Is(err, limiter.ErrReservationExpired):
		// Settled late is settled: the store answered for what it held.
		o.Verdict, o.Decision.Allowed = VerdictAllowed, true
	case errors.Is(err, unknown):
		o.Verdict = VerdictRejected
	case errors.Is(err, context.Canceled):
		o.Verdict, o.Decision.Failure = VerdictCanceled, limiter.FailureCanceled
	default:
		o.Verdict, o.Decision.Failure = VerdictFailClosed, limiter.FailureClosed
	}
}

// Settled reports whether the store answered o's call for what it held: a settle, charge,
// release or renewal done (late included).
func (o Outcome) Settled() bool { return o.Op != OpDecide && o.Verdict == VerdictAllowed }

// Reporter traces and records the outcomes of a way in: every Op through the one Record, so that
// the metrics of decisions, reservations and leases come from one place whichever way in made
// them. Its members may be nil (nothing is traced, or told). A Reporter is a plain value, safe
// for concurrent use as its members are.
type Reporter struct {
	Trace TraceFunc
	// Recorder is told of every decision once (never of a dry run) and, when it is a
	// limiter.LeaseRecorder, of the leases taken, given back and found expired.
	Recorder limiter.Recorder
	Costs    CostRecorder // told what reservations did
}

// Record tells the recorders of o, once, as its Op says:
//   - OpDecide: RecordDecision (a way in that records no dry run does not pass one); a lease taken (+1 in flight) and those found
//     expired; a reservation opened (CostReserved, its estimate).
//   - OpCommit, OpCancel: settled (on time or late), CostSettled as the store answered, after
//     CostUnknown of a.Unknown; a reservation of this instance's own (not FromToken) that the
//     store no longer holds, or failed to settle, CostExpired: its expiry settles it.
//   - OpCharge: CostReserved of the reservation opened (1, or 0 on a spent budget) and, as
//     settled, CostSettled; a reservation not settled, CostExpired.
//   - OpRelease: one lease fewer in flight, unless FromToken and the store held no such lease
//     (the token is the caller's word), and the leases found expired.
//   - OpRenew: a lease renewal's leases found expired.
//
// Figures the store did not answer are those of this instance's own holds, never a token's.
// o is read, never kept: a pointer, so that every decision does not copy its Outcome to learn
// that no recorder is set.
func (r Reporter) Record(ctx context.Context, o *Outcome) {
	switch o.Op {
	case OpDecide:
		if r.Recorder != nil {
			r.Recorder.RecordDecision(ctx, o.Recorded())
			if o.Mode == limiter.ModeLease || (o.Set != nil && o.Set.Lease != nil) {
				var taken int64
				if o.Lease.ID != "" {
					taken = 1
				}
				r.leases(ctx, o, taken, o.Leased.Expired)
			}
		}
		if o.Reservation.ID != "" && r.Costs != nil {
			r.Costs.CostReserved(o.Endpoint, o.Tier, o.Reservation.Estimate)
		}
	case OpCommit, OpCancel, OpCharge:
		r.settled(o)
	case OpRelease:
		if r.Recorder != nil {
			held := int64(-1)
			if o.FromToken && o.Verdict == VerdictRejected {
				held = 0
			}
			r.leases(ctx, o, held, o.Leased.Expired)
		}
	case OpRenew:
		if r.Recorder != nil && o.Leases != nil {
			r.leases(ctx, o, 0, o.Renewal.Expired)
		}
	}
}

func (r Reporter) leases(ctx context.Context, o *Outcome, inFlight, expired int64) {
	if lr, ok := r.Recorder.(limiter.LeaseRecorder); ok && (inFlight != 0 || expired != 0) {
		lr.RecordLeases(ctx, o.Endpoint, o.Tier, inFlight, expired)
	}
}

// settled records a commit, cancel or charge.
func (r Reporter) settled(o *Outcome) {
	if r.Costs == nil {
		return
	}
	switch {
	case o.Op != OpCharge:
	case o.Reservation.ID != "":
		r.Costs.CostReserved(o.Endpoint, o.Tier, o.Reservation.Estimate)
	case o.Settled():
		// On a spent budget: a reservation of 0 settled at the cost, which is what a charge
		// taken is; one not taken opened nothing.
		r.Costs.CostReserved(o.Endpoint, o.Tier, 0)
	}
	switch {
	case o.Settled():
		if o.Unknown != "" {
			r.Costs.CostUnknown(o.Endpoint, o.Tier, o.Unknown)
		}
		measured := o.Op == OpCommit && o.Unknown == ""
		r.Costs.CostSettled(o.Endpoint, o.Tier, Counted(o.Settlement, o.Limit.Quota()), measured)
	case o.FromToken, o.Reservation.ID == "", o.Verdict == VerdictCanceled:
		// Nothing of this instance's own is left for the expiry to settle.
	default:
		r.Costs.CostExpired(o.Endpoint, o.Tier, o.Reservation.Estimate)
	}
}

// Settle is Settle traced and recorded.
func (r Reporter) Settle(ctx context.Context, a Ask, cancel bool) Outcome {
	ctx, end := r.Trace.Start(ctx, a, a.Limiter.Limit())
	o := Settle(ctx, a, cancel)
	return r.done(ctx, o, end)
}

// SettleAsync is SettleAsync traced and recorded once the store answered; then (nil: none) gets
// the recorded Outcome, on the goroutine SettleAsync names.
func (r Reporter) SettleAsync(ctx context.Context, a Ask, cancel bool, then func(Outcome)) {
	ctx, end := r.Trace.Start(ctx, a, a.Limiter.Limit())
	SettleAsync(ctx, a, cancel, func(o Outcome) {
		r.done(ctx, o, end)
		if then != nil {
			then(o)
		}
	})
}

// Charge is Charge traced and recorded.
func (r Reporter) Charge(ctx context.Context, a Ask) Outcome {
	ctx, end := r.Trace.Start(ctx, a, a.Limiter.Limit())
	o := Charge(ctx, a)
	return r.done(ctx, o, end)
}

// Release is Release traced and recorded.
func (r Reporter) Release(ctx context.Context, a Ask) Outcome {
	ctx, end := r.Trace.Start(ctx, a, leaseLimit(a.Leases))
	o := Release(ctx, a)
	return r.done(ctx, o, end)
}

// Renew is Renew traced and recorded.
func (r Reporter) Renew(ctx context.Context, a Ask) Outcome {
	var lim limiter.Limit
	if a.Leases != nil {
		lim = leaseLimit(a.Leases)
	} else {
		lim = a.Limiter.Limit()
	}
	ctx, end := r.Trace.Start(ctx, a, lim)
	o := Renew(ctx, a)
	return r.done(ctx, o, end)
}

func (r Reporter) done(ctx context.Context, o Outcome, end func(limiter.Status, limiter.Decision, error)) Outcome {
	o.EndTrace(end)
	r.Record(ctx, &o)
	return o
}

// SettleSetAsync settles, without the caller waiting, every reservation the parts of an ask of
// several limits opened (PartOutcome.Reservation, limiter.ModeReserve): each committed on its
// part's Limiter at a.Cost, at its estimate when a.Unknown says the cost is unknown, or given
// back whole with cancel, as SettleAsync settles one. A charge past a part's estimate is taken
// even past its quota and never refuses. The first part's settle is traced and recorded (the
// cost metrics count a request once, as its decision recorded one estimate); the others'
// Outcomes are only given to then. then (nil: none) gets each part's Outcome once, on the
// goroutines SettleAsync names. Safe for concurrent use.
func (r Reporter) SettleSetAsync(ctx context.Context, a Ask, parts []PartOutcome, cancel bool, then func(Outcome)) {
	r.settleSet(ctx, a, parts, cancel, func(_ int, o Outcome) {
		if then != nil {
			then(o)
		}
	})
}

// SettleSet is SettleSetAsync waited for: it returns, once the store answered them all, the
// Outcome of each part that holds a reservation, in parts' order. On a store that settles
// without waiting (Redis's) the settles ride one batch. Safe for concurrent use.
func (r Reporter) SettleSet(ctx context.Context, a Ask, parts []PartOutcome, cancel bool) []Outcome {
	n := 0
	for _, p := range parts {
		if p.Reservation.ID != "" {
			n++
		}
	}
	out := make([]Outcome, n)
	var wg sync.WaitGroup
	wg.Add(n)
	r.settleSet(ctx, a, parts, cancel, func(i int, o Outcome) {
		out[i] = o
		wg.Done()
	})
	wg.Wait()
	return out
}

// settleSet settles each part holding a reservation, the first traced and recorded; then gets
// the i-th such part's Outcome once.
func (r Reporter) settleSet(ctx context.Context, a Ask, parts []PartOutcome, cancel bool, then func(int, Outcome)) {
	i := 0
	for _, p := range parts {
		if p.Reservation.ID == "" {
			continue
		}
		pa := a
		pa.Set, pa.Key, pa.Limiter, pa.Reservation = nil, p.Key, p.Limiter, p.Reservation
		at := i
		done := func(o Outcome) { then(at, o) }
		if i == 0 {
			r.SettleAsync(ctx, pa, cancel, done)
		} else {
			SettleAsync(ctx, pa, cancel, done)
		}
		i++
	}
}

// KeepSet renews every reservation the parts of an ask of several limits opened, each on its
// part's Limiter every third of its hold (limiter.Limiter.Keep), until stop is called. Safe for
// concurrent use.
func KeepSet(parts []PartOutcome) (stop func()) {
	var stops []func()
	for _, p := range parts {
		if p.Reservation.ID != "" {
			stops = append(stops, p.Limiter.Keep(p.Reservation))
		}
	}
	return func() {
		for _, s := range stops {
			s()
		}
	}
}
