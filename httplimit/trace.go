package httplimit

import "github.com/rl-exporter/rl-exporter/decision"

// TraceFunc starts the trace of one decision (see decision.TraceFunc); httplimit itself knows no
// tracing library.
type TraceFunc = decision.TraceFunc
