package rls_test

import (
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// A charge_on_stream_done report arriving when the budget is already spent (the requests
// peeked and were served while there was room; their costs arrive after) is charged all the
// same: the debt it leaves is waited for before the next admission.
func TestStreamDoneChargeOnASpentBudgetIsStillCharged(t *testing.T) {
	const rules = `
domain: llm
descriptors:
  - key: api_key
    rate_limit: {unit: minute, requests_per_unit: 100, algorithm: token_bucket, charge_on_stream_done: true}
`
	for _, b := range []backend{memoryBackend(), redisBackend(t)} {
		t.Run(b.name, func(t *testing.T) {
			h := start(t, b.open(t), writeDir(t, map[string]string{"llm.yaml": rules}), nil)
			for range 2 {
				if h.call(t, "llm", 0, withHits(desc("api_key", "team-a"), 0)).OverallCode != ok {
					t.Fatal("a peek on a full bucket was refused")
				}
			}
			h.call(t, "llm", 0, withHits(desc("api_key", "team-a"), 100)) // spends the budget
			h.call(t, "llm", 0, withHits(desc("api_key", "team-a"), 50))  // arrives with it spent
			peek := h.call(t, "llm", 0, withHits(desc("api_key", "team-a"), 0))
			if peek.OverallCode != rlsv3.RateLimitResponse_OVER_LIMIT {
				t.Fatalf("the next peek passed with 150 charged of a budget of 100")
			}
			if got := peek.Statuses[0].DurationUntilReset.AsDuration(); got < 75*time.Second {
				t.Errorf("the bucket is full again in %s, want about 90s: the charge of 50 made on a spent budget was not taken", got)
			}
		})
	}
}
