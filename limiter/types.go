package limiter

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Limit is what a Limiter enforces. It is a plain value: copy it freely.
//
// Rate requests are admitted per Period. For the window algorithms
// (fixed_window, sliding_log, sliding_window) Rate is the window's limit and
// Period its length. For the bucket algorithms (token_bucket, leaky_bucket,
// gcra) Burst is the bucket size and Rate/Period the refill (or drain) rate.
type Limit struct {
	// Algorithm selects how the limit is enforced.
	Algorithm Algorithm
	// Rate is the number of requests per Period; must be > 0.
	Rate int64
	// Period is the window length or the refill interval; must be > 0.
	Period time.Duration
	// Burst is the bucket size of token_bucket, leaky_bucket and gcra.
	// Zero means Rate. Ignored by the window algorithms.
	Burst int64
	// NoDelay makes leaky_bucket admit at once instead of returning a Delay,
	// while still counting the request in the bucket (NGINX's nodelay).
	NoDelay bool
	// AlignWindows makes fixed_window and sliding_window start their windows
	// on multiples of Period since the Unix epoch. By default each key's
	// windows are offset by a hash of the key so that clients do not all
	// reset at the same instant.
	AlignWindows bool
}

// PerSecond returns a Limit of rate requests per second with the given algorithm.
func PerSecond(a Algorithm, rate int64) Limit {
	return Limit{Algorithm: a, Rate: rate, Period: time.Second}
}

// PerMinute returns a Limit of rate requests per minute with the given algorithm.
func PerMinute(a Algorithm, rate int64) Limit {
	return Limit{Algorithm: a, Rate: rate, Period: time.Minute}
}

// PerHour returns a Limit of rate requests per hour with the given algorithm.
func PerHour(a Algorithm, rate int64) Limit {
	return Limit{Algorithm: a, Rate: rate, Period: time.Hour}
}

// Quota is the number of requests a client can make at once from a fresh
// state: Rate for window algorithms, the bucket size for bucket algorithms.
// It is what the X-RateLimit-Limit header and the RateLimit-Policy q
// parameter carry.
func (l Limit) Quota() int64 {
	if spec := SpecOf(l.Algorithm); spec != nil {
		return spec.quota(l)
	}
	return l.Rate
}

// Window is the window length for window algorithms, and for bucket
// algorithms the time an empty bucket takes to refill (or a full one to
// drain) completely. It is the RateLimit-Policy w parameter.
func (l Limit) Window() time.Duration {
	if l.Algorithm.IsBucket() {
		return time.Duration(float64(l.Period) * float64(l.Quota()) / float64(l.Rate))
	}
	return l.Period
}

// Interval is the time one unit of Rate takes to refill or drain: Period/Rate.
func (l Limit) Interval() time.Duration { return l.Period / time.Duration(l.Rate) }

// Validate reports whether the limit is usable, naming the first field that is not.
func (l Limit) Validate() error {
	if _, err := ParseAlgorithm(string(l.Algorithm)); err != nil {
		return fmt.Errorf("algorithm: %w", err)
	}
	if l.Rate <= 0 {
		return fmt.Errorf("rate: must be > 0, got %d", l.Rate)
	}
	if l.Period <= 0 {
		return fmt.Errorf("period: must be > 0, got %s", l.Period)
	}
	if l.Period < time.Millisecond {
		return fmt.Errorf("period: must be at least 1ms, got %s", l.Period)
	}
	if l.Burst < 0 {
		return fmt.Errorf("burst: must be >= 0, got %d", l.Burst)
	}
	if l.Period/time.Duration(l.Rate) <= 0 {
		return fmt.Errorf("rate: %d per %s is finer than one nanosecond per request", l.Rate, l.Period)
	}
	// Both stores count in units of 1/Period µs, up to Quota·Period; Lua
	// numbers are doubles, exact only up to 2^53.
	if q, p := l.Quota(), int64(l.Period/time.Microsecond); q > maxExactInteger/p || l.Rate > maxExactInteger/p {
		return fmt.Errorf("rate/burst: %d per %s needs more than 2^53 microsecond units; use a shorter period or a smaller limit", max(q, l.Rate), l.Period)
	}
	// A decision's reset and retry times reach up to two windows ahead
	// (sliding_window: the rest of this window and the next); they must stay
	// within time.Duration and, added to the current time, within the Unix
	// times headers carry.
	if l.Period > maxWindow {
		return fmt.Errorf("period: %s is longer than %s (100 years), so reset times would overflow", l.Period, maxWindow)
	}
	if l.Algorithm.IsBucket() {
		if w := float64(l.Period) * float64(l.Quota()) / float64(l.Rate); w > float64(maxWindow) {
			return fmt.Errorf("burst: a bucket of %d refilled at %d per %s takes longer than %s (100 years) to refill, so reset times would overflow", l.Quota(), l.Rate, l.Period, maxWindow)
		}
	}
	return nil
}

// maxWindow is the longest window (or bucket refill) a limit may have:
// twice it, from now, stays far from the ends of time.Duration and of
// UnixNano.
const maxWindow = 100 * 365 * 24 * time.Hour

// maxExactInteger is 2^53, the largest integer up to which every integer
// is exactly representable as a float64.
const maxExactInteger = 1 << 53

// ErrCostExceedsLimit is returned, wrapped, when a single request costs more
// than the quota, so it could never be admitted.
var ErrCostExceedsLimit = errors.New("cost exceeds the limit's quota")

// ErrInvalidCost is returned, wrapped, for a cost below 1.
var ErrInvalidCost = errors.New("cost must be at least 1")

// CheckCost validates a cost against the limit's quota.
func (l Limit) CheckCost(cost int64) error {
	if cost < 1 {
		return fmt.Errorf("%w: got %d", ErrInvalidCost, cost)
	}
	if q := l.Quota(); cost > q {
		return fmt.Errorf("%w: cost %d > quota %d", ErrCostExceedsLimit, cost, q)
	}
	return nil
}

// Failure says whether, and how, a Decision was made without the store.
type Failure uint8

const (
	// FailureNone: the store decided.
	FailureNone Failure = iota
	// FailureOpen: the store failed and the request is let through.
	FailureOpen
	// FailureClosed: the store failed and the request is refused.
	FailureClosed
	// FailureLocal: the store failed and the local share of the limit
	// decided (FailLocal): the decision is degraded.
	FailureLocal
	// FailureCanceled: the caller cancelled while the store decided; the
	// request is refused (nobody waits for it) and this is no store failure.
	FailureCanceled
)

// String returns "none", "open", "closed", "local" or "canceled".
func (f Failure) String() string {
	switch f {
	case FailureOpen:
		return "open"
	case FailureClosed:
		return "closed"
	case FailureLocal:
		return "local"
	case FailureCanceled:
		return "canceled"
	}
	return "none"
}

// Decision is the answer to one request. It is a plain value.
type Decision struct {
	// Allowed is true when the request may pass.
	Allowed bool
	// Limit is the quota in force (Limit.Quota()).
	Limit int64
	// Remaining is how many units could still be admitted right now, after
	// this decision (a rejected decision changes nothing); never negative.
	Remaining int64
	// ResetAfter is how long until the full quota is available again.
	ResetAfter time.Duration
	// RetryAfter is, for a rejected request, how long until the same cost
	// could be admitted; 0 when allowed.
	RetryAfter time.Duration
	// Delay is, for an admitted leaky_bucket request without NoDelay, how
	// long to hold the request before passing it on; otherwise 0.
	Delay time.Duration
	// Admitted is the number of units this decision took: the cost when an
	// AllowN is allowed, between 1 and n when an AllowAtMost is (fewer than
	// n when only that many fitted), and 0 when rejected and for every
	// PeekN (which takes nothing, even when Allowed says the cost would
	// pass). A fail-open decision admits the whole cost.
	Admitted int64
	// Failure is FailureNone when the store decided; otherwise the policy
	// that decided in its place (and the error is returned beside the Decision).
	Failure Failure
}

// Store makes decisions atomically. Implementations are safe for concurrent
// use by many goroutines.
type Store interface {
	// Decide admits or rejects cost units for key under lim. lim has been
	// validated and cost checked against it by the caller. An error means the
	// store could not decide; the Decision is then ignored.
	Decide(ctx context.Context, key string, lim Limit, cost int64) (Decision, error)
	// Name is a short identifier of the store kind ("memory", "redis") for
	// logs and metric labels.
	Name() string
}

// Observer is told how long each store call took. The collector implements
// it; the limiter never imports Prometheus. Implementations must be safe for
// concurrent use and cheap: they run on the decision path.
type Observer interface {
	// ObserveStore reports one store call for the given algorithm
	// (operation) that took elapsed and ended with err (nil on success).
	ObserveStore(ctx context.Context, operation string, elapsed time.Duration, err error)
}
