package redisstore_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
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
		var d limiter.Decision
		var err error
		eventually(t, 5*time.Second, func() string {
			return fmt.Sprintf("fail %s: Redis is back but decisions still fail: %+v, %v", p.policy, d, err)
		}, func() bool {
			d, err = l.Allow(ctx, "outage")
			return err == nil && d.Failure == limiter.FailureNone
		})
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
	// A refused connection is an error, not a timeout: it is not dialled
	// again until the deadline passes.
	outage(t, srv, srv.Stop, srv.Start, "error")
}

// A frozen Redis accepts connections but never answers: only the deadline,
// applied to the socket through ContextTimeoutEnabled, ends the call.
func TestUnresponsiveRedisGivesThePolicyDecisionWithinTheDeadline(t *testing.T) {
	t.Parallel()
	srv := redistest.Single(t)
	outage(t, srv, srv.Freeze, srv.Thaw, "timeout")
}

// Many concurrent callers, so that decisions wait in batches: during an
// outage every one of them still gets its policy's decision by its own
// deadline, and after it the batches flow again.
func TestConcurrentBatchedDecisionsFollowThePolicyWithinTheirDeadline(t *testing.T) {
	t.Parallel()
	for _, mode := range []struct {
		name     string
		wantKind string
		down, up func(*redistest.Server)
	}{
		{"a frozen Redis", "timeout", (*redistest.Server).Freeze, (*redistest.Server).Thaw},
		{"a stopped Redis", "error", (*redistest.Server).Stop, (*redistest.Server).Start},
	} {
		t.Run(mode.name, func(t *testing.T) {
			srv := redistest.Single(t)
			timeout := limiter.DefaultTimeout
			if raceEnabled {
				timeout = 500 * time.Millisecond
			}
			store, batches := newCountingStore(t, redisstore.ClientConfig{URL: srv.URL()}, redisstore.Config{})
			limiters := map[limiter.FailPolicy]*limiter.Limiter{}
			for _, p := range policies {
				l, err := limiter.New(limiter.Config{Limit: limiter.Limit{Algorithm: limiter.GCRA, Rate: 1000, Period: time.Second},
					Store: store, FailPolicy: p.policy, Timeout: timeout})
				if err != nil {
					t.Fatal(err)
				}
				limiters[p.policy] = l
			}
			burst := func(check func(p policyCase, d limiter.Decision, err error, took time.Duration)) {
				var wg sync.WaitGroup
				for _, p := range policies {
					for g := 0; g < 32; g++ {
						wg.Add(1)
						go func() {
							defer wg.Done()
							for i := 0; i < 3; i++ {
								start := time.Now()
								d, err := limiters[p.policy].Allow(context.Background(), "concurrent-outage:"+strconv.Itoa(g))
								check(p, d, err, time.Since(start))
							}
						}()
					}
				}
				wg.Wait()
			}
			var healthy atomic.Int64
			burst(func(p policyCase, d limiter.Decision, err error, _ time.Duration) {
				if err != nil || d.Failure != limiter.FailureNone || !d.Allowed {
					t.Errorf("fail %s before the outage: %+v, %v", p.policy, d, err)
				}
				healthy.Add(1)
			})
			if batches.Batched() == 0 {
				t.Fatalf("%d concurrent decisions and none shared a batch", healthy.Load())
			}

			mode.down(srv)
			burst(func(p policyCase, d limiter.Decision, err error, took time.Duration) {
				if err == nil {
					t.Errorf("fail %s during the outage: no error (%+v)", p.policy, d)
					return
				}
				if d.Allowed != p.allowed || d.Failure != p.failure {
					t.Errorf("fail %s during the outage: Allowed %v Failure %s, want %v %s (err %v)", p.policy, d.Allowed, d.Failure, p.allowed, p.failure, err)
				}
				if kind := limiter.ErrorKind(err); mode.wantKind != "" && kind != mode.wantKind {
					t.Errorf("fail %s: error kind %q, want %q: %v", p.policy, kind, mode.wantKind, err)
				}
				if !raceEnabled && took > timeout+deadlineMargin {
					t.Errorf("fail %s: decision took %s, want within the %s deadline (+%s)", p.policy, took, timeout, deadlineMargin)
				}
			})

			mode.up(srv)
			var d limiter.Decision
			var err error
			eventually(t, 5*time.Second, func() string {
				return fmt.Sprintf("Redis is back but decisions still fail: %+v, %v", d, err)
			}, func() bool {
				d, err = limiters[limiter.FailClosed].Allow(context.Background(), "concurrent-outage:probe")
				return err == nil && d.Failure == limiter.FailureNone
			})
			before := batches.Batched()
			burst(func(p policyCase, d limiter.Decision, err error, _ time.Duration) {
				if err != nil || d.Failure != limiter.FailureNone || !d.Allowed {
					t.Errorf("fail %s after recovery: %+v, %v", p.policy, d, err)
				}
			})
			if batches.Batched() == before {
				t.Errorf("after recovery no decision shared a batch")
			}
		})
	}
}
