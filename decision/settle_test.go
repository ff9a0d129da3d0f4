package decision

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// told is every recorder call a Reporter made, one line each.
type told struct{ calls []string }

func (t *told) RecordDecision(_ context.Context, r limiter.Record) {
	t.calls = append(t.calls, fmt.Sprintf("decision %s %s %s", r.Endpoint, r.PlanTier, r.Status))
}
func (t *told) RecordLeases(_ context.Context, endpoint, tier string, inFlight, expired int64) {
	t.calls = append(t.calls, fmt.Sprintf("leases %s %s %+d expired %d", endpoint, tier, inFlight, expired))
}
func (t *told) CostReserved(endpoint, tier string, units int64) {
	t.calls = append(t.calls, fmt.Sprintf("reserved %s %s %d", endpoint, tier, units))
}
func (t *told) CostSettled(endpoint, tier string, s limiter.Settlement, measured bool) {
	t.calls = append(t.calls, fmt.Sprintf("settled %s %s estimate %d actual %d refunded %d charged %d late %v measured %v",
		endpoint, tier, s.Estimate, s.Actual, s.Refunded, s.Charged, s.Late, measured))
}
func (t *told) CostExpired(endpoint, tier string, units int64) {
	t.calls = append(t.calls, fmt.Sprintf("expired %s %s %d", endpoint, tier, units))
}
func (t *told) CostUnknown(endpoint, tier, reason string) {
	t.calls = append(t.calls, fmt.Sprintf("unknown %s %s %s", endpoint, tier, reason))
}
func (t *told) CostDuplicate(endpoint, tier, read string) {
	t.calls = append(t.calls, fmt.Sprintf("duplicate %s %s %s", endpoint, tier, read))
}

func (t *told) take() []string { c := t.calls; t.calls = nil; return c }

// Every op of a way in is traced and recorded from its Outcome alone, through one Reporter: the
// figures are the store's answer, and a token's are counted only as far as the store holds it.
func TestEveryOpIsTracedAndRecordedFromItsOutcome(t *testing.T) {
	ctx := context.Background()
	store := limiter.NewMemoryStore(limiter.MemoryConfig{})
	l, err := limiter.New(limiter.Config{Store: store, Limit: limiter.PerMinute(limiter.FixedWindow, 1000)})
	if err != nil {
		t.Fatal(err)
	}
	leases, err := limiter.NewLeases(limiter.LeasesConfig{Store: store, Limit: limiter.LeaseLimit{Limit: 2, TTL: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	rec, tr := &told{}, &spans{}
	r := Reporter{Trace: tr.trace, Recorder: rec, Costs: rec}
	ask := Ask{Endpoint: "POST /chat", Tier: "pro", Key: "chat|pro|ip:1", Cost: 30, Mode: limiter.ModeReserve, Limiter: l}
	reserve := func() limiter.Reservation {
		o := Decide(ctx, ask)
		r.Record(ctx, &o)
		if o.Reservation.ID == "" {
			t.Fatalf("nothing reserved: %+v", o)
		}
		return o.Reservation
	}
	with := func(res limiter.Reservation, cost int64, unknown string, token bool) Ask {
		a := ask
		a.Reservation, a.Cost, a.Unknown, a.FromToken = res, cost, unknown, token
		return a
	}
	check := func(name string, o Outcome, op Op, v Verdict, calls ...string) {
		t.Helper()
		if o.Op != op || o.Verdict != v {
			t.Errorf("%s: op %s verdict %d, want %s %d (err %v)", name, o.Op, o.Verdict, op, v, o.Err)
		}
		if got := rec.take(); !reflect.DeepEqual(got, calls) && (len(got) > 0 || len(calls) > 0) {
			t.Errorf("%s: told %q, want %q", name, got, calls)
		}
		if len(tr.started) != 1 || len(tr.ended) != 1 || tr.ended[0] != string(v.Status()) {
			t.Errorf("%s: spans started %q, ended %q; want one ended %s", name, tr.started, tr.ended, v.Status())
		}
		tr.started, tr.ended = nil, nil
	}

	res := reserve()
	if got := rec.take(); !reflect.DeepEqual(got, []string{"decision POST /chat pro allowed", "reserved POST /chat pro 30"}) {
		t.Errorf("reserving: told %q", got)
	}
	check("a commit", r.Settle(ctx, with(res, 12, "", false), false), OpCommit, VerdictAllowed,
		"settled POST /chat pro estimate 30 actual 12 refunded 18 charged 0 late false measured true")
	check("the same commit again, by token", r.Settle(ctx, with(res, 12, "", true), false), OpCommit, VerdictRejected)
	check("the same commit again, of the instance's own", r.Settle(ctx, with(res, 12, "", false), false), OpCommit, VerdictRejected,
		"expired POST /chat pro 30")

	res = reserve()
	rec.take()
	// A token's estimate is the caller's word: whatever it says, the store's is counted.
	claimed := res
	claimed.Estimate = 1_000_000
	check("a cancel of a token claiming another estimate", r.Settle(ctx, with(claimed, 0, "", true), true), OpCancel, VerdictAllowed,
		"settled POST /chat pro estimate 30 actual 0 refunded 30 charged 0 late false measured false")

	res = reserve()
	rec.take()
	check("a commit at a cost unknown", r.Settle(ctx, with(res, 99, CostMissing, false), false), OpCommit, VerdictAllowed,
		"unknown POST /chat pro missing",
		"settled POST /chat pro estimate 30 actual 30 refunded 0 charged 0 late false measured false")

	one := ask
	one.Cost = 1
	o := Decide(ctx, one)
	check("a charge of a one-unit reservation", r.Charge(ctx, with(o.Reservation, 25, "", false)), OpCharge, VerdictAllowed,
		"reserved POST /chat pro 1",
		"settled POST /chat pro estimate 1 actual 25 refunded 0 charged 24 late false measured false")
	check("a charge on a spent budget", r.Charge(ctx, with(limiter.Reservation{}, 7, "", false)), OpCharge, VerdictAllowed,
		"reserved POST /chat pro 0",
		"settled POST /chat pro estimate 0 actual 7 refunded 0 charged 7 late false measured false")

	lask := Ask{Endpoint: "POST /upload", Tier: "free", Key: "upload|free|ip:1", Mode: limiter.ModeLease, Leases: leases}
	lo := Decide(ctx, lask)
	r.Record(ctx, &lo)
	if got := rec.take(); !reflect.DeepEqual(got, []string{"decision POST /upload free allowed", "leases POST /upload free +1 expired 0"}) {
		t.Errorf("a lease: told %q", got)
	}
	lask.Lease = lo.Lease
	rn := r.Renew(ctx, lask)
	check("a lease renewed", rn, OpRenew, VerdictAllowed)
	if rn.Renewal.Expires.IsZero() {
		t.Error("a renewal answers no new end")
	}
	check("a lease released", r.Release(ctx, lask), OpRelease, VerdictAllowed, "leases POST /upload free -1 expired 0")
	lask.FromToken = true
	check("a lease released twice, by token", r.Release(ctx, lask), OpRelease, VerdictRejected)
	check("a lease renewed once released", r.Renew(ctx, lask), OpRenew, VerdictRejected)

	res = reserve()
	rec.take()
	check("a reservation renewed", r.Renew(ctx, with(res, 0, "", true)), OpRenew, VerdictAllowed)
}

// A store that fails leaves the reservation to its expiry: a way in answers 503, and only this
// instance's own reservation is counted expired.
func TestASettleTheStoreFailsIsFailClosedAndLeftToItsExpiry(t *testing.T) {
	ctx := context.Background()
	l, err := limiter.New(limiter.Config{Store: limiter.NewMemoryStore(limiter.MemoryConfig{}), Limit: limiter.PerMinute(limiter.FixedWindow, 100)})
	if err != nil {
		t.Fatal(err)
	}
	o := Decide(ctx, Ask{Endpoint: "/a", Tier: "free", Key: "k", Cost: 5, Mode: limiter.ModeReserve, Limiter: l})
	// The same limit on a store that keeps no reservations: every settle fails, as on a store
	// that cannot be reached.
	other, err := limiter.New(limiter.Config{Store: keepsNone{limiter.NewMemoryStore(limiter.MemoryConfig{})}, Limit: l.Limit()})
	if err != nil {
		t.Fatal(err)
	}
	rec := &told{}
	a := Ask{Endpoint: "/a", Tier: "free", Key: "k", Cost: 5, Limiter: other, Reservation: o.Reservation}
	s := Reporter{Costs: rec}.Settle(ctx, a, false)
	if s.Verdict != VerdictFailClosed || !s.Verdict.Refuses() || s.Err == nil {
		t.Errorf("a settle the store failed: verdict %d, err %v; want fail-closed", s.Verdict, s.Err)
	}
	if got := rec.take(); !reflect.DeepEqual(got, []string{"expired /a free 5"}) {
		t.Errorf("own reservation: told %q", got)
	}
	a.FromToken = true
	Reporter{Costs: rec}.Settle(ctx, a, false)
	if got := rec.take(); len(got) != 0 {
		t.Errorf("a token's: told %q, want nothing", got)
	}
}

// keepsNone is a store of decisions alone: it hides the reservations its Store keeps.
type keepsNone struct{ limiter.Store }

func TestEveryOpHasAName(t *testing.T) {
	for op := OpDecide; op <= OpRenew; op++ {
		if op.String() == "unknown" {
			t.Errorf("op %d has no name", op)
		}
	}
	if (OpRenew + 1).String() != "unknown" {
		t.Error("an op past the last has a name; the test above misses one")
	}
}
