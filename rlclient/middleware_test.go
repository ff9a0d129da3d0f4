package rlclient_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/httplimit"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/rlclient"
)

// limitedAPI is an API behind rl-exporter's own middleware (memory store,
// real clock) with the given limit on every path; it counts the requests
// that reach the API.
func limitedAPI(t *testing.T, lim limiter.Limit) (url string, reached *atomic.Int64) {
	t.Helper()
	policy, err := httplimit.NewPolicy(httplimit.PolicyConfig{
		Store:   limiter.NewMemoryStore(limiter.MemoryConfig{}),
		Classes: []httplimit.Class{{Name: "api", Routes: []string{"/"}, Limits: map[string]limiter.Limit{"default": lim}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	mw, err := httplimit.New(httplimit.Config{Policy: policy})
	if err != nil {
		t.Fatal(err)
	}
	reached = new(atomic.Int64)
	srv := httptest.NewServer(mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		io.WriteString(w, "ok")
	})))
	t.Cleanup(srv.Close)
	return srv.URL, reached
}

func TestTransportBehindTheRateLimitMiddleware(t *testing.T) {
	t.Parallel()
	t.Run("a client over the limit waits as told and gets through", func(t *testing.T) {
		url, reached := limitedAPI(t, limiter.Limit{Algorithm: limiter.TokenBucket, Rate: 2, Period: time.Second})
		client := &http.Client{Transport: rlclient.New(rlclient.Config{Jitter: -1})}
		start := time.Now()
		for i := range 3 {
			resp, err := client.Get(url + "/items")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("request %d: status %d, want 200 after waiting", i+1, resp.StatusCode)
			}
		}
		// The third request is refused once (Retry-After: 1) and retried.
		if elapsed := time.Since(start); !rlclient.RaceEnabled && elapsed < 400*time.Millisecond {
			t.Errorf("3 requests on a bucket of 2 took %s, want a wait of about 1s", elapsed)
		}
		if reached.Load() != 3 {
			t.Errorf("%d requests reached the API, want 3", reached.Load())
		}
	})
	t.Run("without retries the 429 comes back with its headers", func(t *testing.T) {
		url, reached := limitedAPI(t, limiter.PerMinute(limiter.FixedWindow, 1))
		client := &http.Client{Transport: rlclient.New(rlclient.Config{MaxRetries: -1})}
		var last *http.Response
		for range 2 {
			resp, err := client.Get(url + "/items")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			last = resp
		}
		if last.StatusCode != http.StatusTooManyRequests || last.Header.Get("Retry-After") == "" || reached.Load() != 1 {
			t.Errorf("second request: %d, Retry-After %q, %d reached the API; want 429 with Retry-After, 1", last.StatusCode, last.Header.Get("Retry-After"), reached.Load())
		}
		wait, ok := rlclient.RetryWait(last.Header, time.Now())
		if !ok || wait <= 0 || wait > time.Minute {
			t.Errorf("RetryWait of the middleware's 429 = %s, %v; want a wait within the window", wait, ok)
		}
	})
}
