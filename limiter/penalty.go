package limiter

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Penalty is a penalty box: a key refused After times within Within is
// refused for For, whatever its limit says. A plain value; zero is off.
// The koanf tags name its keys in a config file's classes.<name>.penalty.
type Penalty struct {
	After  int64         `koanf:"after"`  // refusals that trip it; 0: off
	Within time.Duration `koanf:"within"` // the refusals counted: those since the first one, for this long
	For    time.Duration `koanf:"for"`    // how long the key is refused once tripped
}

// Enabled reports whether p does anything.
func (p Penalty) Enabled() bool { return p.After > 0 }

// Validate reports whether p is usable, naming the first field that is
// not: the error is a *FieldError.
func (p Penalty) Validate() error {
	if !p.Enabled() {
		if p.After < 0 {
			return fieldErrorf("after", "must be >= 1, got %d", p.After)
		}
		return nil
	}
	if p.Within < time.Millisecond {
		return fieldErrorf("within", "must be at least 1ms, got %s", p.Within)
	}
	if p.For < time.Millisecond {
		return fieldErrorf("for", "must be at least 1ms, got %s", p.For)
	}
	if p.Within > maxWindow {
		return fieldErrorf("within", "must be at most %s", maxWindow)
	}
	if p.For > maxWindow {
		return fieldErrorf("for", "must be at most %s", maxWindow)
	}
	return nil
}

// PenaltyStore keeps the strikes and penalties of keys, each call atomic and
// safe for concurrent use; a timeout > 0 bounds a call as well as ctx.
type PenaltyStore interface {
	// Penalized returns how long key stays refused; 0 when it is not.
	Penalized(ctx context.Context, key string, timeout time.Duration) (time.Duration, error)
	// Strike counts one refusal of key; the p.After-th within p.Within
	// boxes it for exactly p.For, returned, else 0. A boxed key stays so.
	Strike(ctx context.Context, key string, p Penalty, timeout time.Duration) (time.Duration, error)
	// Lift takes key out of the box and forgets its strikes.
	Lift(ctx context.Context, key string, timeout time.Duration) error
}

// ErrNoPenalties is returned, wrapped, for a penalty on a store that keeps none.
var ErrNoPenalties = errors.New("store keeps no penalties")

// PenaltiesOf returns st as a PenaltyStore, or an error wrapping ErrNoPenalties.
func PenaltiesOf(st Store) (PenaltyStore, error) {
	if ps, ok := st.(PenaltyStore); ok {
		return ps, nil
	}
	return nil, fmt.Errorf("%s store: %w", st.Name(), ErrNoPenalties)
}
