package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
)

// deadlineMargin is how much later than its deadline a failed decision may
// return (checked only without -race).
const deadlineMargin = 250 * time.Millisecond

type policyCase struct {
	policy  limiter.FailPolicy
	allowed bool
	failure limiter.Failure
}

var policies = []policyCase{
	{limiter.FailOpen, true, limiter.FailureOpen},
	{limiter.FailClosed, false, limiter.FailureClosed},
	{limiter.FailLocal, true, limiter.FailureLocal},
}

// outage runs the policies through an outage made by down and ended by up.
func outage(t *testing.T, srv *redistest.Server, down, up func(), wantKind string) {
	lim := limiter.Limit{Algorithm: limiter.TokenBucket, Rate: 100, Period: time.Second}
	// The default deadline, except under -race, where a loaded machine can
	// take longer than 100 ms to answer even when Redis is up.
	timeout := limiter.DefaultTimeout
	if raceEnabled {
		timeout = 500 * time.Millisecond
	}
	limiters := map[limiter.FailPolicy]*limiter.Limiter{}
	for _, p := range policies {
		l, err := limiter.New(limiter.Config{
			Limit:      lim,
			Store:      newStore(t, redisstore.ClientConfig{URL: srv.URL()}),
			FailPolicy: p.policy,
			Timeout:    timeout,
		})
		if err != nil {
			t.Fatal(err)
		}
		limiters[p.policy] = l
	}
	ctx := context.Background()
	for _, p := range policies {
		if d, err := limiters[p.policy].Allow(ctx, "outage"); err != nil || d.Failure != limiter.FailureNone || !d.Allowed {
			t.Fatalf("%s before the outage: %+v, %v", p.policy, d, err)
		}
	}

	down()
	for _, p := range policies {
		for i := 0; i < 2; i++ {
			start := time.Now()
			d, err := limiters[p.policy].Allow(ctx, "outage")
			took := time.Since(start)
			if err == nil {
				t.Fatalf("fail %s during the outage: no error (%+v)", p.policy, d)
			}
			if d.Allowed != p.allowed || d.Failure != p.failure {
				t.Fatalf("fail %s during the outage: Allowed %v Failure %s, want %v %s (err %v)", p.policy, d.Allowed, d.Failure, p.allowed, p.failure, err)
			}
			if kind := limiter.ErrorKind(err); wantKind != "" && kind != wantKind {
				t.Fatalf("fail %s: error kind %q, want %q: %v", p.policy, kind, wantKind, err)
			}
			if !raceEnabled && took > timeout+deadlineMargin {
				t.Fatalf("fail %s: decision took %s, want within the %s deadline (+%s)", p.policy, took, timeout, deadlineMargin)
			}
		}
	}

	up()
	for _, p := range policies {
		l := limiters[p.policy]
		deadline := time.Now().Add(5 * time.Second)
		for {
			d, err := l.Allow(ctx, "outage")
			if err == nil && d.Failure == limiter.FailureNone {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("fail %s: Redis is back but decisions still fail: %+v, %v", p.policy, d, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		for i := 0; i < 5; i++ {
			if d, err := l.Allow(ctx, "outage"); err != nil || d.Failure != limiter.FailureNone || !d.Allowed {
				t.Fatalf("fail %s after recovery, decision %d: %+v, %v", p.policy, i, d, err)
			}
		}
	}
}

func TestStoppedRedisGivesThePolicyDecisionAndRecovers(t *testing.T) {
	t.Parallel()
	srv := redistest.Single(t)
	outage(t, srv, srv.Stop, srv.Start, "")
}

// A frozen Redis accepts connections but never answers: only the deadline,
// applied to the socket through ContextTimeoutEnabled, ends the call.
func TestUnresponsiveRedisGivesThePolicyDecisionWithinTheDeadline(t *testing.T) {
	t.Parallel()
	srv := redistest.Single(t)
	outage(t, srv, srv.Freeze, srv.Thaw, "timeout")
}
