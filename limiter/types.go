package limiter

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Limit is what a Limiter enforces (see the package doc). It is a plain value.
type Limit struct {
	Algorithm    Algorithm
	Rate         int64         // > 0
	Period       time.Duration // window length or refill interval, ≥ 1ms
	Burst        int64         // a bucket algorithm's size; 0 means Rate
	NoDelay      bool          // leaky_bucket gives no Delay (NGINX's nodelay)
	AlignWindows bool          // windows start on multiples of Period since the epoch
	// Calendar puts fixed_window's windows on a calendar; Period is then Calendar.Unit.Longest().
	Calendar *Calendar
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

// Quota is how many units a fresh key admits at once: Rate, or the bucket size.
func (l Limit) Quota() int64 {
	if spec := SpecOf(l.Algorithm); spec != nil {
		return spec.quota(l)
	}
	return l.Rate
}

// Window is the window length, or the time a bucket takes to refill.
func (l Limit) Window() time.Duration {
	if l.Algorithm.IsBucket() {
		return time.Duration(float64(l.Period) * float64(l.Quota()) / float64(l.Rate))
	}
	return l.Period
}

// Interval is the time one unit of Rate takes to refill or drain: Period/Rate.
func (l Limit) Interval() time.Duration { return l.Period / time.Duration(l.Rate) }

// Validate reports whether the limit is usable; the error is a *FieldError.
func (l Limit) Validate() error {
	if _, err := ParseAlgorithm(string(l.Algorithm)); err != nil {
		return &FieldError{Field: "algorithm", Err: err}
	}
	if l.Rate <= 0 {
		return fieldErrorf("rate", "must be > 0, got %d", l.Rate)
	}
	if l.Period <= 0 {
		return fieldErrorf("period", "must be > 0, got %s", l.Period)
	}
	if l.Period < time.Millisecond {
		return fieldErrorf("period", "must be at least 1ms, got %s", l.Period)
	}
	if l.Burst < 0 {
		return fieldErrorf("burst", "must be >= 0, got %d", l.Burst)
	}
	if l.Period/time.Duration(l.Rate) <= 0 {
		return fieldErrorf("rate", "%d per %s is finer than one nanosecond per request", l.Rate, l.Period)
	}
	if l.Calendar != nil {
		if err := l.Calendar.validate(l); err != nil {
			return err
		}
	}
	// Both stores count up to Quota·Period µs (a calendar units alone); Lua is exact to 2^53.
	if q, p := l.Quota(), int64(l.Period/time.Microsecond); l.Calendar == nil && (q > maxExactInteger/p || l.Rate > maxExactInteger/p) {
		field := "rate"
		if q > l.Rate {
			field = "burst"
		}
		return fieldErrorf(field, "%d per %s needs more than 2^53 microsecond units; use a shorter period or a smaller limit", max(q, l.Rate), l.Period)
	}
	// Reset and retry times, up to two windows ahead, must not overflow.
	if l.Period > maxWindow {
		return fieldErrorf("period", "%s is longer than %s (100 years), so reset times would overflow", l.Period, maxWindow)
	}
	if l.Algorithm.IsBucket() {
		if w := float64(l.Period) * float64(l.Quota()) / float64(l.Rate); w > float64(maxWindow) {
			return fieldErrorf("burst", "a bucket of %d refilled at %d per %s takes longer than %s (100 years) to refill, so reset times would overflow", l.Quota(), l.Rate, l.Period, maxWindow)
		}
	}
	return nil
}

// FieldError is what Validate of a Limit, LeaseLimit or Penalty returns: the field at
// fault as a config file names it ("calendar.unit"), and why. A plain value.
type FieldError struct {
	Field string
	Err   error
}

// Error is "field: reason".
func (e *FieldError) Error() string { return e.Field + ": " + e.Err.Error() }

// Unwrap returns the reason.
func (e *FieldError) Unwrap() error { return e.Err }

func fieldErrorf(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Err: fmt.Errorf(format, args...)}
}

const (
	maxWindow       = 100 * 365 * 24 * time.Hour // the longest window or bucket refill
	maxExactInteger = 1 << 53                    // every integer up to it is exact in a float64
)

// ErrCostExceedsLimit is returned, wrapped, for a cost above the quota.
var ErrCostExceedsLimit = errors.New("cost exceeds the limit's quota")

// ErrInvalidCost is returned, wrapped, for a cost below 1.
var ErrInvalidCost = errors.New("cost must be at least 1")

// CheckCost validates cost against the quota.
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
	FailureNone     Failure = iota // the store decided
	FailureOpen                    // the store failed; let through
	FailureClosed                  // the store failed; refused
	FailureLocal                   // the store failed; the local share decided
	FailureCanceled                // the caller cancelled; refused, no store failure
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
	Allowed    bool
	Limit      int64         // Limit.Quota()
	Remaining  int64         // what could still be admitted now; ≥ 0
	ResetAfter time.Duration // until the full quota is back
	RetryAfter time.Duration // rejected: until the same cost could pass; else 0
	Delay      time.Duration // to hold an admitted leaky_bucket request for
	// Admitted is how many units were taken: 0 when rejected and for every peek.
	Admitted int64
	Failure  Failure // who decided when the store did not
}

// Store makes decisions atomically. Implementations are safe for concurrent use.
type Store interface {
	// Decide admits or rejects cost units (checked by the caller); on error the Decision is ignored.
	Decide(ctx context.Context, key string, lim Limit, cost int64) (Decision, error)
	// Name is the store kind ("memory", "redis") for logs and metric labels.
	Name() string
}

// Observer is told of every store call. Implementations must be safe for concurrent
// use and cheap: they run on the decision path.
type Observer interface {
	ObserveStore(ctx context.Context, operation string, elapsed time.Duration, err error)
}
