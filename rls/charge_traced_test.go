package rls_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/rls"
)

// spanLog is a TraceFunc keeping each span's endpoint and the status it ended with.
type spanLog struct {
	mu    sync.Mutex
	spans []string
}

func (l *spanLog) trace(ctx context.Context, endpoint, _ string, _ limiter.Algorithm) (context.Context, func(limiter.Status, limiter.Decision, error)) {
	return ctx, func(s limiter.Status, _ limiter.Decision, _ error) {
		l.mu.Lock()
		l.spans = append(l.spans, endpoint+" "+string(s))
		l.mu.Unlock()
	}
}

func (l *spanLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.spans
	l.spans = nil
	slices.Sort(s) // a charge's span ends inside its admission's
	return s
}

// A charge_on_stream_done report is traced and recorded as the HTTP path's settle is: its
// admission's span and its charge's, and the cost it charged in rate_limit_cost_total, whether it
// settles the one unit its call reserved or is charged on a budget too spent to reserve one.
func TestAStreamDoneChargeIsTracedAndRecorded(t *testing.T) {
	const rules = `
domain: llm
descriptors:
  - key: api_key
    rate_limit: {unit: minute, requests_per_unit: 100, algorithm: token_bucket, charge_on_stream_done: true}
`
	tr := &spanLog{}
	h := start(t, limiter.NewMemoryStore(limiter.MemoryConfig{}), writeDir(t, map[string]string{"llm.yaml": rules}),
		func(c *rls.Config) { c.Trace = tr.trace })
	h.call(t, "llm", 0, withHits(desc("api_key", "team-a"), 0))
	if got := tr.take(); len(got) != 1 || got[0] != "llm.api_key allowed" {
		t.Errorf("a peek: spans %q, want one allowed", got)
	}
	h.call(t, "llm", 0, withHits(desc("api_key", "team-a"), 100))
	if got := tr.take(); len(got) != 2 || got[0] != "llm.api_key allowed" || got[1] != "llm.api_key allowed" {
		t.Errorf("a charge: spans %q, want its admission's and its charge's, allowed", got)
	}
	h.call(t, "llm", 0, withHits(desc("api_key", "team-a"), 30))
	if got := tr.take(); len(got) != 2 || got[0] != "llm.api_key allowed" || got[1] != "llm.api_key rejected" {
		t.Errorf("a charge on a spent budget: spans %q, want its refused admission's and its charge's", got)
	}
	if got := h.costTotal(t, "committed"); got != 130 {
		t.Errorf("rate_limit_cost_total{phase=committed} = %v, want the 130 charged", got)
	}
	if got := h.costTotal(t, "reserved"); got != 1 {
		t.Errorf("rate_limit_cost_total{phase=reserved} = %v, want the one unit the first charge reserved", got)
	}
}
