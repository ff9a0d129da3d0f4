package decision

import (
	"context"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// spans is a TraceFunc that keeps what each span was started and ended with.
type spans struct{ started, ended []string }

func (s *spans) trace(ctx context.Context, endpoint, tier string, alg limiter.Algorithm) (context.Context, func(limiter.Status, limiter.Decision, error)) {
	s.started = append(s.started, endpoint+" "+tier+" "+string(alg))
	return ctx, func(st limiter.Status, _ limiter.Decision, _ error) { s.ended = append(s.ended, string(st)) }
}

func TestAWayInRecordsAndTracesClassTierAndStatusFromTheOutcomeAlone(t *testing.T) {
	store := limiter.NewMemoryStore(limiter.MemoryConfig{})
	lim := limiter.PerMinute(limiter.FixedWindow, 1)
	l, err := limiter.New(limiter.Config{Store: store, Limit: lim})
	if err != nil {
		t.Fatal(err)
	}
	leases, err := limiter.NewLeases(limiter.LeasesConfig{Store: store, Limit: limiter.LeaseLimit{Limit: 1, TTL: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	ask := Ask{Endpoint: "GET /orders/{id}", Tier: "pro", Key: "orders|pro|ip:1", Cost: 1, Limiter: l}
	leaseAsk := Ask{Endpoint: "POST /upload", Tier: "free", Key: "upload|free|ip:1", Mode: limiter.ModeLease, Leases: leases}
	concurrency := limiter.Limit{Algorithm: limiter.Concurrency, Rate: 1}
	steps := []struct {
		name       string
		ask        Ask
		wantStatus limiter.Status
		wantLimit  limiter.Limit
	}{
		{"a dry run under the limit would pass", func() Ask { a := ask; a.Mode = limiter.ModePeek; return a }(), limiter.StatusAllowed, lim},
		{"the first request is admitted", ask, limiter.StatusAllowed, lim},
		{"the second is refused", ask, limiter.StatusRejected, lim},
		{"a shadow class over its limit passes", func() Ask { a := ask; a.Shadow = true; return a }(), limiter.StatusShadowRejected, lim},
		{"a lease is taken", leaseAsk, limiter.StatusAllowed, concurrency},
		{"a second lease is refused", leaseAsk, limiter.StatusRejected, concurrency},
	}
	for _, s := range steps {
		tr := &spans{}
		ctx, end := TraceFunc(tr.trace).Start(context.Background(), s.ask, s.wantLimit)
		o := Decide(ctx, s.ask)
		o.EndTrace(end)
		rec := o.Recorded()
		if rec.Endpoint != s.ask.Endpoint || rec.PlanTier != s.ask.Tier || rec.Key != s.ask.Key || rec.Status != s.wantStatus || rec.Limit != s.wantLimit {
			t.Errorf("%s: recorded %s %s %s %s on %+v; want %s %s %s %s on %+v", s.name,
				rec.Endpoint, rec.PlanTier, rec.Key, rec.Status, rec.Limit, s.ask.Endpoint, s.ask.Tier, s.ask.Key, s.wantStatus, s.wantLimit)
		}
		wantSpan := s.ask.Endpoint + " " + s.ask.Tier + " " + string(s.wantLimit.Algorithm)
		if len(tr.started) != 1 || tr.started[0] != wantSpan || len(tr.ended) != 1 || tr.ended[0] != string(s.wantStatus) {
			t.Errorf("%s: spans started %q, ended %q; want one started %q, ended %s", s.name, tr.started, tr.ended, wantSpan, s.wantStatus)
		}
		if s.ask.Mode == limiter.ModeLease && (o.Lease.ID != "") != (s.wantStatus == limiter.StatusAllowed) {
			t.Errorf("%s: lease %+v", s.name, o.Lease)
		}
	}
	var none TraceFunc
	if ctx, end := none.Start(context.Background(), ask, lim); ctx == nil || end != nil {
		t.Error("a nil TraceFunc starts a span")
	}
	Outcome{}.EndTrace(nil)
}

// An at-most ask takes what fits of its cost and is refused only when not one unit does, as
// Limiter.AllowAtMost answers: the one Mode means the same in an Ask as in a store call.
func TestAnAtMostAskTakesWhatFits(t *testing.T) {
	l, err := limiter.New(limiter.Config{Store: limiter.NewMemoryStore(limiter.MemoryConfig{}), Limit: limiter.PerMinute(limiter.FixedWindow, 5)})
	if err != nil {
		t.Fatal(err)
	}
	ask := Ask{Endpoint: "POST /batch", Tier: "free", Key: "batch|free|ip:1", Cost: 3, Mode: limiter.ModeAtMost, Limiter: l}
	for _, want := range []struct {
		status   limiter.Status
		admitted int64
	}{{limiter.StatusAllowed, 3}, {limiter.StatusAllowed, 2}, {limiter.StatusRejected, 0}} {
		o := Decide(context.Background(), ask)
		if o.Status() != want.status || o.Decision.Admitted != want.admitted {
			t.Errorf("at most 3 of 5: %s with %d admitted, want %s with %d", o.Status(), o.Decision.Admitted, want.status, want.admitted)
		}
	}
}
