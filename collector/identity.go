package collector

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
)

// newIdentityFallbacks is rate_limit_identity_fallbacks_total: requests whose credentials
// identified no client. Its reasons are the few the caller names (httplimit's Fallback…
// constants), never a client's input, so that the series stay bounded.
func newIdentityFallbacks() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rate_limit_identity_fallbacks_total",
		Help: "Requests whose credentials identified no client (an API key of an unknown scheme or unknown, malformed, a JWT failing verification), keyed by client address or refused, by reason."},
		[]string{"reason"})
}

// RecordIdentityFallback counts one request whose credentials identified no client, by reason.
// Part of httplimit.IdentityRecorder: safe for concurrent use.
func (c *Collector) RecordIdentityFallback(_ context.Context, reason string) {
	c.identityFallbacks.WithLabelValues(reason).Inc()
}
