package rls_test

import (
	"sync"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
	"github.com/rl-exporter/rl-exporter/rls"
)

func TestTwoInstancesSharingOneRedisAdmitTheLimitOnce(t *testing.T) {
	srv := redistest.Single(t)
	dir := writeDir(t, map[string]string{"suite.yaml": suiteConfig})
	// A call slower than the default 100 ms on a loaded machine would fail open and count as
	// an admission Redis never saw: this test is about sharing the limit, so none times out.
	patient := func(c *rls.Config) { c.Engine.FailPolicy, c.Engine.Timeout = limiter.FailClosed, 10*time.Second }
	a := start(t, redisStore(t, redisstore.ClientConfig{URL: srv.URL(), ReadTimeout: 10 * time.Second}), dir, patient)
	b := start(t, redisStore(t, redisstore.ClientConfig{URL: srv.URL(), ReadTimeout: 10 * time.Second}), dir, patient)
	var mu sync.Mutex
	total := 0
	var wg sync.WaitGroup
	for _, h := range []*harness{a, b, a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := 0
			for range 5 {
				if h.call(t, "suite", 0, desc("fixed", "shared")).OverallCode == ok {
					n++
				}
			}
			mu.Lock()
			total += n
			mu.Unlock()
		}()
	}
	wg.Wait()
	if total != 3 {
		t.Errorf("two instances admitted %d together, want the limit 3 once", total)
	}
}

func TestStoreFailureAnswersPerFailPolicy(t *testing.T) {
	srv := redistest.Single(t)
	store := redisStore(t, redisstore.ClientConfig{URL: srv.URL()})
	srv.Stop()
	dir := writeDir(t, map[string]string{"suite.yaml": suiteConfig})
	cases := []struct {
		policy  limiter.FailPolicy
		want    []bool // OK per call
		counted string
	}{
		{limiter.FailOpen, []bool{true, true, true, true}, "fail_open"},
		{limiter.FailClosed, []bool{false, false}, "fail_closed"},
		{limiter.FailLocal, []bool{true, true, true, false}, ""},
	}
	for _, tc := range cases {
		t.Run("fail policy "+string(tc.policy), func(t *testing.T) {
			h := start(t, store, dir, func(c *rls.Config) { c.Engine.FailPolicy = tc.policy })
			for i, want := range tc.want {
				resp := h.call(t, "suite", 0, desc("fixed", "down"))
				if got := resp.OverallCode == ok; got != want {
					t.Fatalf("call %d: %v, want OK=%v", i+1, resp.OverallCode, want)
				}
			}
			if tc.counted != "" {
				if n := h.count(t, "suite.fixed", "free", tc.counted); n != float64(len(tc.want)) {
					t.Errorf("counted %v %s, want %d", n, tc.counted, len(tc.want))
				}
			}
		})
	}
}

func TestSwapPutsNewRulesInForce(t *testing.T) {
	dir := writeDir(t, map[string]string{"d.yaml": "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: day, requests_per_unit: 1}\n"})
	h := start(t, limiter.NewMemoryStore(limiter.MemoryConfig{}), dir, nil)
	if st := h.call(t, "d", 0, desc("k", "v")).Statuses[0]; st.CurrentLimit.GetRequestsPerUnit() != 1 {
		t.Fatalf("%v, want 1 per day", st)
	}
	next := writeDir(t, map[string]string{"d.yaml": "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: day, requests_per_unit: 7}\n"})
	r, err := rls.LoadDir(next)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.svc.Swap(r); err != nil {
		t.Fatal(err)
	}
	if st := h.call(t, "d", 0, desc("k", "v")).Statuses[0]; st.CurrentLimit.GetRequestsPerUnit() != 7 {
		t.Fatalf("%v after the swap, want 7 per day", st)
	}
}
