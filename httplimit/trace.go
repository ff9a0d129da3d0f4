package httplimit

import (
	"context"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// TraceFunc starts the trace of one decision. It is called before the
// limiter with the request's context and returns the context to decide
// with — carrying the decision's span, so that the store's own spans and
// the latency exemplar belong to it — and the function to call once with
// the outcome, which ends the span. serve builds one from a
// tracing.Provider; httplimit itself knows no tracing library.
//
// Implementations must be safe for concurrent use: they run on the request
// path of every request.
type TraceFunc func(ctx context.Context, endpoint, planTier string, algorithm limiter.Algorithm) (context.Context, func(limiter.Status, limiter.Decision, error))
