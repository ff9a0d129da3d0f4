package limiter

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

// ExpiryPolicy says what becomes of a reservation nobody settles before its
// hold ends: a proxy that crashed, a commit that was lost.
type ExpiryPolicy uint8

const (
	ExpireCharge ExpiryPolicy = iota // the estimate stays spent (the default)
	ExpireRefund                     // the estimate is given back
)

// String returns "charge" or "refund".
func (p ExpiryPolicy) String() string {
	if p == ExpireRefund {
		return "refund"
	}
	return "charge"
}

// ParseExpiryPolicy parses "charge" (or "") and "refund".
func ParseExpiryPolicy(s string) (ExpiryPolicy, error) {
	switch s {
	case "", "charge":
		return ExpireCharge, nil
	case "refund":
		return ExpireRefund, nil
	}
	return 0, fmt.Errorf("unknown expiry policy %q: want charge or refund", s)
}

// DefaultHold is how long a reservation stays open when Config.Hold is 0.
const DefaultHold = 5 * time.Minute

// Reservation is a handle on units Reserve took until Commit or Cancel settles them.
// It is a plain value; settle it once.
type Reservation struct {
	ID       string // 128 random bits in hex; "" when the fail policy decided
	Key      string
	Estimate int64
	Expires  time.Time
}

// Settlement is what settling a reservation did.
type Settlement struct {
	Estimate int64 // what was reserved
	Actual   int64 // what it cost; 0 for Cancel
	Refunded int64 // Estimate − Actual when positive: given back
	Charged  int64 // Actual − Estimate when positive: taken, even past the quota
	// Expired counts the key's other reservations settled by their policy in the call.
	Expired int64
	// Late says the reservation had expired before this settle: Charged is then the actual
	// cost beyond what the expiry took, at most one quota, and Refunded is 0.
	Late bool
}

// Renewal is what renewing a reservation or a lease did.
type Renewal struct {
	Expires time.Time // the new end of its hold or TTL, on the store's clock
	// Expired counts the key's other reservations or leases found expired in the call.
	Expired int64
}

// ErrReservationUnknown is returned, wrapped, when no open reservation has the id;
// nothing changed, except for ErrReservationExpired, which wraps it.
var ErrReservationUnknown = errors.New("reservation unknown: already settled, cancelled or expired")

// ErrReservationExpired is returned, wrapped, by a settle of a reservation expired
// within one hold before it: the excess was charged late (Settlement.Late).
var ErrReservationExpired = fmt.Errorf("reservation expired before it was settled, its cost charged late: %w", ErrReservationUnknown)

// ReserveRequest is one reservation asked of a Reserver.
type ReserveRequest struct {
	ID       string
	Estimate int64 // checked by the caller as a cost
	Hold     time.Duration
	OnExpiry ExpiryPolicy
}

// Reserver is a Store that can hold reservations, safe for concurrent use, each call atomic.
type Reserver interface {
	Store
	// Reserve decides r.Estimate as Decide does and, if admitted, records r.ID beside the
	// key (same Redis hash slot) for r.Hold. A timeout > 0 bounds the call as well as ctx.
	Reserve(ctx context.Context, key string, lim Limit, r ReserveRequest, timeout time.Duration) (Decision, error)
	// Settle settles reservation id at actual units, taking an excess even past the quota
	// so that the next requests wait; actual < 0 cancels. ErrReservationUnknown, wrapped,
	// when it is not open.
	Settle(ctx context.Context, key string, lim Limit, id string, actual int64, timeout time.Duration) (Settlement, error)
	// Charge takes cost (≥ 1) units unconditionally, as Settle does a reservation of 0
	// settled at cost, within the bounds Settle keeps; it opens no record.
	Charge(ctx context.Context, key string, lim Limit, cost int64, timeout time.Duration) (Settlement, error)
	// Renew extends reservation id to hold from now on the store's clock;
	// ErrReservationUnknown, wrapped, when it is not open.
	Renew(ctx context.Context, key string, lim Limit, id string, hold time.Duration, timeout time.Duration) (Renewal, error)
}

// AsyncSettler is a Reserver that settles without its caller waiting. Safe for concurrent use.
type AsyncSettler interface {
	Reserver
	// SettleAsync returns at once; then gets Settle's result exactly once, on a
	// store goroutine (or the caller's), and must not block.
	SettleAsync(ctx context.Context, key string, lim Limit, id string, actual int64, timeout time.Duration, then func(Settlement, error))
}

// NewReservationID returns 128 random bits in hex, unguessable.
func NewReservationID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("reservation id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}
