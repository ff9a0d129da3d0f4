package limiter

import "context"

// Status is how a request fared, as counted in metrics. The values are
// the status label values of rate_limit_requests_total.
type Status string

// The statuses of a decision.
const (
	// StatusAllowed: admitted by the limit.
	StatusAllowed Status = "allowed"
	// StatusRejected: over the limit, refused with 429.
	StatusRejected Status = "rejected"
	// StatusShadowRejected: over a limit in shadow mode, let through.
	StatusShadowRejected Status = "shadow_rejected"
	// StatusFailOpen: the store failed and the request was let through.
	StatusFailOpen Status = "fail_open"
	// StatusFailClosed: the store failed and the request was refused with 503.
	StatusFailClosed Status = "fail_closed"
)

// StatusCanceled: the caller cancelled (went away) while the store
// decided. It is not one of AllStatuses: a cancelled request is counted in
// rate_limit_canceled_total, never in rate_limit_requests_total, and it is
// neither a store failure nor a fail-open.
const StatusCanceled Status = "canceled"

// NumStatuses is the number of statuses AllStatuses returns.
const NumStatuses = 5

// AllStatuses returns every Status of rate_limit_requests_total in a
// stable order, as a new slice the caller may keep or change. It does not
// include StatusCanceled.
func AllStatuses() []Status {
	return []Status{StatusAllowed, StatusRejected, StatusShadowRejected, StatusFailOpen, StatusFailClosed}
}

// Record describes one decision made for one request, for whoever observes
// decisions (the collector). It is passed by value and must not be retained
// beyond the call except by copying the fields needed.
type Record struct {
	// Endpoint is the matched route pattern (never a raw path).
	Endpoint string
	// PlanTier is the client's plan tier (a configured tier name).
	PlanTier string
	// Key is the client's rate-limit key. Never use it as a metric label.
	Key string
	// Limit is the limit that was applied.
	Limit Limit
	// Status is how the request fared.
	Status Status
	// Decision is the limiter's answer.
	Decision Decision
	// Err is the store error behind a fail-open, fail-closed or degraded
	// (Decision.Failure FailureLocal) decision, else nil.
	Err error
}

// Recorder is told of every decision, exactly once per request. The HTTP
// layer calls it; the collector implements it. Implementations must be safe
// for concurrent use and cheap (no allocation for known label sets): they run
// on the request path.
type Recorder interface {
	RecordDecision(ctx context.Context, r Record)
}
