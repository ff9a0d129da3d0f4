package httplimit

import "github.com/rl-exporter/rl-exporter/limiter"

// TierLimit is one of the several limits a tier puts on each request
// (Class.TierLimits): requests per minute beside tokens per minute beside a
// monthly quota per organisation beside a concurrency cap. The request is
// admitted only when every limit of its tier admits it, and a refused
// request takes from none. A plain value.
type TierLimit struct {
	// Name tells the limit apart within its tier's list: in RateLimit-Policy,
	// refused_by, usage, metrics' limit label and live limits'
	// <class>:<tier>:<name>. ValidName; unique within the list.
	Name string
	// Limit is a rate limit; zero when Lease is set.
	Limit limiter.Limit
	// Lease, when set, makes the entry a concurrency limit: the request holds
	// a lease on it while it runs and takes from the others.
	Lease *limiter.LeaseLimit
	// Unit says what the limit counts; zero: UnitCost when the class reads
	// its cost (CostFrom) or sets a Cost other than 1, else UnitRequests.
	Unit Unit
	// Scope says whose budget the limit counts; zero: ScopeClient.
	Scope Scope
	// Shadow and Penalty, when set, override the class's for this limit.
	Shadow  *bool
	Penalty *limiter.Penalty
}

// Unit is what a TierLimit takes from its budget per request.
type Unit string

const (
	// UnitRequests takes 1 per request, whatever its cost.
	UnitRequests Unit = "requests"
	// UnitCost takes the request's cost: reserved at admission and settled
	// at the response's when the class reads it (CostFrom).
	UnitCost Unit = "cost"
)

// ScopeKind is whose budget a TierLimit counts.
type ScopeKind string

const (
	// ScopeClient counts per client: the request's key, as a single limit does.
	ScopeClient ScopeKind = "client"
	// ScopeGlobal counts one budget for the whole class.
	ScopeGlobal ScopeKind = "global"
	// ScopeHeader counts per value of a request header (Scope.Header), read only
	// from the identity's trusted header peers.
	ScopeHeader ScopeKind = "header"
	// ScopeClaim counts per value of a verified JWT claim (Scope.Claim).
	ScopeClaim ScopeKind = "claim"
)

// Scope is whose budget a TierLimit counts. The zero value is ScopeClient.
// A plain value.
type Scope struct {
	Kind   ScopeKind
	Header string // ScopeHeader's header, canonical or not
	Claim  string // ScopeClaim's claim name
}
