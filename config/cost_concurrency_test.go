package config

import (
	"strings"
	"testing"
)

// cost_from settles a reservation of a rate limit; a class capped only by requests in flight has
// none to settle, and check says so at the key rather than serve failing on the first request.
func TestCostFromOnAClassOfConcurrencyLimitsAloneIsRefusedAtItsKey(t *testing.T) {
	_, err := Parse("bad.yaml", []byte(`tiers: {names: [free, pro], default: free}
classes:
  jobs:
    cost_from: {json: usage.total_tokens}
    limits:
      free: {algorithm: concurrency, limit: 2}
      pro: {algorithm: concurrency, limit: 8}
`))
	if err == nil || !strings.Contains(err.Error(), "classes.jobs.cost_from: ") || !strings.Contains(err.Error(), "concurrency") {
		t.Fatalf("error %v, want classes.jobs.cost_from named as useless on concurrency limits", err)
	}
	// A class with a rate limit on one tier keeps cost_from for that tier.
	if _, err := Parse("ok.yaml", []byte(`tiers: {names: [free, pro], default: free}
classes:
  jobs:
    cost_from: {json: usage.total_tokens}
    limits:
      free: {algorithm: concurrency, limit: 2}
      pro: {algorithm: token_bucket, rate: 1000, period: 1m}
`)); err != nil {
		t.Fatalf("cost_from with a token bucket on pro: %v", err)
	}
}
