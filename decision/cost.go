package decision

import "github.com/rl-exporter/rl-exporter/limiter"

// CostRecorder is told what reservations did, for the cost metrics; every way in that settles
// reservations tells it. Implementations are safe for concurrent use and cheap: they run on the
// request path.
type CostRecorder interface {
	// CostReserved: a reservation of units opened at admission.
	CostReserved(endpoint, planTier string, units int64)
	// CostSettled: a reservation was committed or cancelled, as the store answered (Counted).
	// measured says s.Actual is a real cost read from the response or given by the caller, not
	// the estimate standing in for one. s.Late: it had expired first (its estimate counts as
	// expired) and s.Charged was taken late.
	CostSettled(endpoint, planTier string, s limiter.Settlement, measured bool)
	// CostExpired: a reservation of units was found gone when settled: its hold had ended, and its
	// expiry policy charged or refunded it.
	CostExpired(endpoint, planTier string, units int64)
	// CostUnknown: a response gave no usable cost (reason: httplimit's CostMissing and the others);
	// its reservation is committed at the estimate.
	CostUnknown(endpoint, planTier, reason string)
	// CostDuplicate: a request's estimate (read DuplicateEstimate) or a response's cost (read
	// DuplicateCost) was given more than once, a JSON member or a header repeated, and read as
	// the largest.
	CostDuplicate(endpoint, planTier, read string)
}

// What was given more than once: the read label of rate_limit_cost_duplicates_total.
const (
	DuplicateEstimate = "estimate" // in the request, read for its estimate
	DuplicateCost     = "cost"     // in the response, read for its cost
)

// Counted is s as the cost metrics count it: no figure above quota, so that a caller's cost of
// 10^18 moves a counter by one quota at most (the store's own adjustment is bounded likewise).
func Counted(s limiter.Settlement, quota int64) limiter.Settlement {
	s.Estimate, s.Actual = min(s.Estimate, quota), min(s.Actual, quota)
	s.Refunded, s.Charged = min(s.Refunded, quota), min(s.Charged, quota)
	return s
}

// Reasons a response's cost is unknown, so that its reservation is committed at the estimate:
// the reason label of rate_limit_cost_unknown_total.
const (
	CostMissing    = "missing"     // no such header, trailer or field
	CostInvalid    = "invalid"     // not a whole number ≥ 0
	CostTooLarge   = "too_large"   // the body or event holding it was beyond what is scanned
	CostClientGone = "client_gone" // the response was cut short before its cost was seen
)

// CostReasons lists the reasons in a stable order, as a new slice.
func CostReasons() []string { return []string{CostMissing, CostInvalid, CostTooLarge, CostClientGone} }
