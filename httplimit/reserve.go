package httplimit

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/rl-exporter/rl-exporter/decision"
	"github.com/rl-exporter/rl-exporter/limiter"
)

// UpstreamReporter is implemented by the response writer the middleware hands the handler of an
// admitted request whose class reads its cost from the response (Class.CostFrom). A proxy calls
// UpstreamFailed where the upstream gave no answer (refused, reset, timed out before its
// response): the request's reservation is then cancelled, the whole estimate given back, since
// nothing was served. Call it from the request's handler only, before it returns.
type UpstreamReporter interface {
	UpstreamFailed()
}

// ReportUpstreamFailure tells the middleware through w that the upstream gave no answer, finding
// its UpstreamReporter in w or in any writer w wraps (Unwrap() http.ResponseWriter, the chain
// http.ResponseController follows). It reports whether one was there: outside a class with
// CostFrom nothing was reserved, so nothing listens. serve's proxy calls it where it answers 502,
// on both its paths. Safe to call from the request's handler only.
func ReportUpstreamFailure(w http.ResponseWriter) bool {
	for {
		switch t := w.(type) {
		case UpstreamReporter:
			t.UpstreamFailed()
			return true
		case interface{ Unwrap() http.ResponseWriter }:
			w = t.Unwrap()
		default:
			return false
		}
	}
}

type costWriterKey struct{}

// UpstreamFailed is ReportUpstreamFailure through the request's context: a no-op outside a class
// with CostFrom. Safe to call from the request's handler only.
//
// Deprecated: use ReportUpstreamFailure, which says so through the response writer.
func UpstreamFailed(ctx context.Context) {
	if cw, ok := ctx.Value(costWriterKey{}).(*costWriter); ok {
		cw.UpstreamFailed()
	}
}

// UpstreamFailed implements UpstreamReporter: the reservation is cancelled once the handler returns.
func (w *costWriter) UpstreamFailed() { w.failed = true }

// serveReserved serves an admitted request of a class with CostFrom: the response streams
// through a costWriter, the reservation renewed every third of its hold meanwhile, and once it
// ends (or the handler panics to abort it) the reservation is committed at the cost read, at the
// estimate when none was, or cancelled when the handler reports the upstream failed
// (ReportUpstreamFailure).
func (m *Middleware) serveReserved(w http.ResponseWriter, r *http.Request, next http.Handler, o *outcome) {
	if o.Reservation.ID == "" {
		next.ServeHTTP(w, r) // nothing to settle: the fail policy's or a shadow class's pass
		return
	}
	cw := &costWriter{ResponseWriter: w, read: costReader{from: o.route.class.costFrom}}
	ctx := context.WithValue(r.Context(), costWriterKey{}, cw) // for the deprecated UpstreamFailed
	defer func() {
		if cw.failed {
			m.cancel(r.Context(), o)
			return
		}
		cost, reason := cw.finish()
		if r.Context().Err() != nil && reason != "" {
			reason = CostClientGone
		}
		if cw.read.dup && m.rep.Costs != nil {
			m.rep.Costs.CostDuplicate(o.Endpoint, o.Tier, decision.DuplicateCost)
		}
		m.commit(r.Context(), o, cost, reason)
	}()
	if o.set != nil {
		defer decision.KeepSet(o.Parts)() // each limit of cost renewed; stopped before the settle above
	} else {
		defer o.Limiter.Keep(o.Reservation)() // stopped before the settle above
	}
	next.ServeHTTP(cw, r.WithContext(ctx))
}

// estimate is what r reserves as est reads it for the ask a, a value given more than once counted.
func (m *Middleware) estimate(r *http.Request, est Estimate, a decision.Ask) int64 {
	n, dup := est.of(r, heldQuota(a))
	if dup && m.rep.Costs != nil {
		m.rep.Costs.CostDuplicate(a.Endpoint, a.Tier, decision.DuplicateEstimate)
	}
	return n
}

// heldQuota is the quota an estimate for a is held to: its Limiter's, or for an ask of several
// limits the least of those that hold it (SetPart.Held), so that every one can admit it.
func heldQuota(a decision.Ask) int64 {
	if a.Set == nil {
		return a.Limiter.Limit().Quota()
	}
	var q int64
	for i, p := range a.Set.Parts {
		if qi := a.Set.Set.Limiter(i).Limit().Quota(); p.Held && (q == 0 || qi < q) {
			q = qi
		}
	}
	return q
}

// commit settles o's reservation at cost, or at its estimate when reason says why cost is unknown.
// It settles even when the client is gone: the upstream's work was done.
func (m *Middleware) commit(ctx context.Context, o *outcome, cost int64, reason string) {
	m.settle(ctx, o, cost, reason, false)
}

// cancel gives o's reservation back whole.
func (m *Middleware) cancel(ctx context.Context, o *outcome) { m.settle(ctx, o, 0, "", true) }

// settle commits or cancels o's reservation through the Reporter, which traces and records it as
// the store answered: one it no longer holds, or failed to settle, is this instance's own and is
// counted expired, its expiry settling it.
func (m *Middleware) settle(ctx context.Context, o *outcome, cost int64, reason string, cancel bool) {
	if o.Reservation.ID == "" {
		return
	}
	a := o.Ask
	a.Reservation, a.Cost, a.Unknown = o.Reservation, cost, reason
	// Nobody waits for the answer: the response has ended. The store sends the settle with its next
	// batch, and the outcome is traced, recorded and logged when it answers.
	ctx = context.WithoutCancel(ctx)
	endpoint := o.Endpoint
	then := func(s decision.Outcome) {
		if s.Verdict == decision.VerdictFailClosed {
			m.logger.LogAttrs(ctx, slog.LevelWarn, "reservation not settled: it expires by its policy",
				slog.String("endpoint", endpoint), slog.String("error", s.Err.Error()))
		}
	}
	if o.set != nil {
		// Each limit of cost holds its own reservation, settled on its own key.
		m.rep.SettleSetAsync(ctx, a, o.Parts, cancel, then)
		return
	}
	m.rep.SettleAsync(ctx, a, cancel, then)
}

// cannotReserve says why a reserving check of class on tier is refused: lim's limiter cannot hold
// a reservation, which takes, for every algorithm that can settle one, a store that keeps them.
func cannotReserve(class, tier string, lim limiter.Limit) string {
	why := "its store keeps none (in serve, a region_mode of async or hybrid, which decides on a local copy: use local or strict)"
	if !limiter.SupportsReservations(lim.Algorithm) {
		why = fmt.Sprintf("the %s algorithm cannot settle one", lim.Algorithm)
	}
	return fmt.Sprintf("reserve: class %q tier %q cannot hold reservations on its %s limit: %s; check without reserve to take the cost at admission",
		class, tier, lim.Algorithm, why)
}

// leaseNotReservation says why a reserving check of a concurrency limit is refused.
func leaseNotReservation(class, tier string) string {
	return fmt.Sprintf(`reserve: class %q tier %q is a concurrency limit, which holds leases, not reservations: ask with "lease": true alone`,
		class, tier)
}
