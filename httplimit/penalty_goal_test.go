//go:build !race

package httplimit

import (
	"net/http"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
)

// Two replicas on one Redis: a key refused three times, on either, is
// refused by both for the whole For, on Redis's clock, and admitted again
// as soon as it is over — while its limit alone would have admitted it
// every 200 ms.
func TestGoalThreeTripsOnRedisPenalizeForExactlyForAcrossReplicas(t *testing.T) {
	srv := redistest.Single(t)
	const forDur = 2 * time.Second
	replica := func() http.Handler {
		client, err := redisstore.ClientConfig{URL: srv.URL()}.NewClient()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = client.Close() })
		st, err := redisstore.New(client, redisstore.Config{})
		if err != nil {
			t.Fatal(err)
		}
		c := oneClass("api", limiter.Limit{Algorithm: limiter.FixedWindow, Rate: 1, Period: 200 * time.Millisecond}, "GET /a")
		c.Penalty = limiter.Penalty{After: 3, Within: 10 * time.Second, For: forDur}
		p, err := NewPolicy(PolicyConfig{Store: st, Classes: []Class{c}})
		if err != nil {
			t.Fatal(err)
		}
		m, err := New(Config{Policy: p})
		if err != nil {
			t.Fatal(err)
		}
		return m.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	}
	replicas := []http.Handler{replica(), replica()}
	status := func(i int) (int, string) {
		r := newRequest("GET", "/a", "10.9.9.9:1")
		w := newRecorder()
		replicas[i%2].ServeHTTP(w, r)
		var body RejectedBody
		if w.Code == http.StatusTooManyRequests {
			decodeJSON(t, w.Body.Bytes(), &body)
		}
		return w.Code, string(body.Status)
	}

	// Trip the box: refusals counted on both replicas.
	i, refused := 0, 0
	var tripped time.Time
	for ; refused < 3; i++ {
		if i > 1000 {
			t.Fatal("never refused three times")
		}
		before := time.Now()
		code, st := status(i)
		if st == "penalized" {
			t.Fatalf("request %d penalized after %d refusals, want only after 3", i, refused)
		}
		if code == http.StatusTooManyRequests {
			refused++
			tripped = before // the box is set after this, on Redis's clock
		}
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	penalized := 0
	for ; ; i++ {
		<-tick.C
		code, st := status(i)
		if st == "penalized" {
			penalized++
			continue
		}
		open := time.Since(tripped)
		if code != http.StatusOK {
			t.Fatalf("first request not penalized, %s after tripping: %d %s, want 200", open, code, st)
		}
		// The box was set after tripped and is read before the answer: it cannot open before
		// For has passed since tripped (1 ms for PX's rounding), and opens within a few ticks.
		if open < forDur-time.Millisecond || open > forDur+250*time.Millisecond {
			t.Errorf("admitted again %s after tripping, want %s (within a few ticks)", open, forDur)
		}
		t.Logf("penalized %d requests on 2 replicas, admitted again %s after tripping (For %s)", penalized, open, forDur)
		break
	}
	if penalized < int(forDur/(10*time.Millisecond))/2 {
		t.Errorf("only %d requests penalized during For", penalized)
	}
}
