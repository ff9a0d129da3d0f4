package httplimit

import (
	"testing"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// Policy.Limits lists each limit of a tier of several by its name, in list order, for the
// collector's quota gauges; a tier of one limit is named after its class.
func TestPolicyLimitsListsATiersSeveralLimitsByName(t *testing.T) {
	p, err := NewPolicy(chatPolicy(limiter.NewMemoryStore(limiter.MemoryConfig{})))
	if err != nil {
		t.Fatal(err)
	}
	type entry struct {
		endpoint, tier, name string
		quota                int64
	}
	var got []entry
	for _, l := range p.Limits() {
		got = append(got, entry{l.Endpoint, l.PlanTier, l.Name, l.Limit.Quota()})
	}
	want := []entry{
		{"/", "default", "default", 100},
		{"GET /search", "default", "per-client", 10}, {"GET /search", "default", "backend", 3},
		{"POST /v1/chat", "default", "rpm", 5}, {"POST /v1/chat", "default", "tpm", 100}, {"POST /v1/chat", "default", "monthly", 300},
	}
	if len(got) != len(want) {
		t.Fatalf("Limits: %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("Limits[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
}
