package collector

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestIdentityFallbacksAreCountedByReason(t *testing.T) {
	c := newTestCollector(t, Config{})
	ctx := context.Background()
	c.RecordIdentityFallback(ctx, "unknown_scheme")
	c.RecordIdentityFallback(ctx, "unknown_key")
	c.RecordIdentityFallback(ctx, "unknown_key")
	want := `# HELP rate_limit_identity_fallbacks_total Requests whose credentials identified no client (an API key of an unknown scheme or unknown, malformed, a JWT failing verification), keyed by client address or refused, by reason.
# TYPE rate_limit_identity_fallbacks_total counter
rate_limit_identity_fallbacks_total{reason="unknown_key"} 2
rate_limit_identity_fallbacks_total{reason="unknown_scheme"} 1
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "rate_limit_identity_fallbacks_total"); err != nil {
		t.Fatal(err)
	}
}
