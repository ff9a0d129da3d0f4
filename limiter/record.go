package limiter

import "context"

// Status is how a request fared: the label a decision is recorded under
// (rate_limit_requests_total's status, the decision API's answer, a span);
// decision.Verdict.Status gives it.
type Status string

const (
	StatusAllowed        Status = "allowed"
	StatusRejected       Status = "rejected"        // over the limit: 429
	StatusShadowRejected Status = "shadow_rejected" // over a shadow limit, let through
	StatusFailOpen       Status = "fail_open"       // the store failed; let through
	StatusFailClosed     Status = "fail_closed"     // the store failed; 503
	StatusPenalized      Status = "penalized"       // in a penalty box: 429, undecided
)

// StatusCanceled (the caller went away) is not in AllStatuses: it is
// counted in rate_limit_canceled_total.
const StatusCanceled Status = "canceled"

// recorded is the one list of the statuses a decision is counted under, in
// the order of their Index; adding a status here gives it its counter.
var recorded = [...]Status{StatusAllowed, StatusRejected, StatusShadowRejected, StatusFailOpen, StatusFailClosed, StatusPenalized}

// NumStatuses is len(AllStatuses()): the number of Index values.
const NumStatuses = len(recorded)

// AllStatuses returns the other statuses in Index order, as a new slice.
func AllStatuses() []Status {
	return append([]Status(nil), recorded[:]...)
}

// Index is s's place in AllStatuses, from 0 to NumStatuses-1, for a table of
// counters by status; ok is false for StatusCanceled and any status not
// there. Safe for concurrent use; it allocates nothing.
func (s Status) Index() (i int, ok bool) {
	for i, r := range recorded {
		if r == s {
			return i, true
		}
	}
	return -1, false
}

// Record is one request's decision, told to a Recorder. It is a plain value.
type Record struct {
	Endpoint string // the matched route pattern, never a raw path
	PlanTier string // a configured tier name
	Key      string // the client's key: never a metric label
	Limit    Limit
	Status   Status
	Decision Decision
	Err      error // the store's error behind a Decision.Failure, else nil
	// RefusedBy names the limits that refused a request decided on several limits at once
	// (nil for a single limit, which its recorder names by Endpoint and PlanTier). It shares
	// the decision's array: a Recorder reads it during RecordDecision and keeps no reference.
	RefusedBy []string
}

// Recorder is told of every request's decision, once. Implementations must
// be safe for concurrent use and cheap: they run on the request path.
type Recorder interface {
	RecordDecision(ctx context.Context, r Record)
}
