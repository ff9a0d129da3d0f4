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

// Reservation is a handle on units Reserve took from a key's budget until
// Commit or Cancel settles them. It is a plain value; settle it once.
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
	// Expired counts the key's other reservations the store found past
	// their hold in the same call and settled by their policy.
	Expired int64
	// Late says the reservation had expired (its policy charged or
	// refunded the estimate) before this settle: Charged is then what the
	// actual cost came to beyond what the expiry took, at most one quota,
	// taken from the key's current window or bucket, and Refunded is 0.
	Late bool
}

// Renewal is what renewing a reservation or a lease did.
type Renewal struct {
	Expires time.Time // the new end of its hold or TTL, on the store's clock
	// Expired counts the key's other reservations or leases the store
	// found past their hold or TTL in the same call.
	Expired int64
}

// ErrReservationUnknown is returned, wrapped, when no open reservation has
// the id: it was settled, cancelled or expired. Nothing changed, except
// for ErrReservationExpired, which wraps it.
var ErrReservationUnknown = errors.New("reservation unknown: already settled, cancelled or expired")

// ErrReservationExpired is returned, wrapped, by a settle of a reservation
// that expired before it: the store still knew it (for one hold past its
// expiry) and charged the actual cost's excess over what the expiry took,
// as the Settlement's Late and Charged say. errors.Is finds
// ErrReservationUnknown in it too: the reservation was no longer open.
var ErrReservationExpired = fmt.Errorf("reservation expired before it was settled, its cost charged late: %w", ErrReservationUnknown)

// ReserveRequest is one reservation asked of a Reserver.
type ReserveRequest struct {
	ID       string
	Estimate int64 // checked by the caller as a cost
	Hold     time.Duration
	OnExpiry ExpiryPolicy
}

// Reserver is a Store that can hold reservations. Implementations are safe
// for concurrent use and do each call atomically.
type Reserver interface {
	Store
	// Reserve decides r.Estimate units for key under lim as Decide does
	// and, when they are admitted, records reservation r.ID beside the key
	// (in the same Redis hash slot), open for r.Hold. A timeout > 0 bounds
	// the call as well as ctx.
	Reserve(ctx context.Context, key string, lim Limit, r ReserveRequest, timeout time.Duration) (Decision, error)
	// Settle settles key's open reservation id at actual units: it gives
	// back what was reserved beyond actual, or takes the excess even past
	// the quota, so that the next requests wait for it. actual < 0 cancels:
	// everything is given back. With no such open reservation it returns
	// ErrReservationUnknown, wrapped, and changes nothing.
	Settle(ctx context.Context, key string, lim Limit, id string, actual int64, timeout time.Duration) (Settlement, error)
	// Charge takes cost (≥ 1) units from key unconditionally, as Settle
	// does a reservation of 0 settled at cost: past the quota too, so that
	// the next requests wait for the debt, within the bounds Settle keeps.
	// It opens no record and returns the Settlement of that settle, with
	// the key's expired reservations it settled on the way.
	Charge(ctx context.Context, key string, lim Limit, cost int64, timeout time.Duration) (Settlement, error)
	// Renew extends key's open reservation id to hold from now, on the
	// store's clock, so that a request still being served keeps it;
	// ErrReservationUnknown, wrapped, when it is not open (settled, or
	// expired already), and nothing changes.
	Renew(ctx context.Context, key string, lim Limit, id string, hold time.Duration, timeout time.Duration) (Renewal, error)
}

// AsyncSettler is a Reserver that can settle without its caller waiting
// (Limiter.CommitAsync). Implementations are safe for concurrent use.
type AsyncSettler interface {
	Reserver
	// SettleAsync makes Settle's call and returns without waiting for it:
	// then gets what Settle would have returned, exactly once, on a
	// goroutine of the store's (or the caller's, when the call could not
	// be sent), once the store answered or the call failed; it must not
	// block.
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
