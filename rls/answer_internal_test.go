package rls

import (
	"testing"

	"github.com/rl-exporter/rl-exporter/decision"
)

// An answer keeps a slot for every header the HTTP path can write: setHeaders
// indexes them without a bound check of its own.
func TestAnAnswerHasRoomForEveryHeader(t *testing.T) {
	if len(decision.HeaderNames) != maxHeaders {
		t.Fatalf("decision.HeaderNames has %d names, an answer room for %d (maxHeaders)", len(decision.HeaderNames), maxHeaders)
	}
}
