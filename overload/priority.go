package overload

import "fmt"

// Priority orders requests for shedding: the lowest is shed first.
type Priority int

// The priorities, lowest first.
const (
	Sheddable Priority = iota
	Default
	Critical
)

// Priorities lists every priority, highest first, as metrics and docs list them.
var Priorities = []Priority{Critical, Default, Sheddable}

// String is the priority as configs and metric labels write it.
func (p Priority) String() string {
	switch p {
	case Critical:
		return "critical"
	case Sheddable:
		return "sheddable"
	default:
		return "default"
	}
}

// ParsePriority reads critical, default or sheddable; "" is Default.
func ParsePriority(s string) (Priority, error) {
	switch s {
	case "critical":
		return Critical, nil
	case "", "default":
		return Default, nil
	case "sheddable":
		return Sheddable, nil
	}
	return Default, fmt.Errorf("unknown priority %q: want critical, default or sheddable", s)
}

// Reason says why a request was shed.
type Reason string

const (
	// ReasonLimit: the whole concurrency limit is in use.
	ReasonLimit Reason = "limit"
	// ReasonReserved: what is left of the limit is kept for higher priorities.
	ReasonReserved Reason = "reserved"
)

// Reasons lists every Reason.
var Reasons = []Reason{ReasonLimit, ReasonReserved}
