package httplimit

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// A gateway gives up on a slow forward-auth answer and takes its failure path (nginx: 504,
// which an "allow on failure" error page lets through). A leaky bucket's queue is in the
// client's hands, so /v1/auth never holds an answer past AuthMaxDelay: a request queued
// further back is refused with the gateway's deny status and the time until its turn.
func TestForwardAuthNeverHoldsAnAnswerPastAuthMaxDelay(t *testing.T) {
	lim := limiter.Limit{Algorithm: limiter.LeakyBucket, Rate: 6, Period: time.Minute, Burst: 5} // 10s per request
	m, _, _ := setup(t, PolicyConfig{Store: limiter.NewMemoryStore(limiter.MemoryConfig{}), Classes: []Class{oneClass("default", lim)}}, newClock())
	h := m.AuthHandler()
	allowed, denied := 0, 0
	for i := range 6 {
		done := make(chan *httptest.ResponseRecorder, 1)
		go func() {
			r := httptest.NewRequest("GET", AuthPath, nil)
			r.RemoteAddr = "127.0.0.1:5000"
			r.Header.Set("X-Original-URI", "/hello")
			r.Header.Set("X-Original-Method", "GET")
			r.Header.Set(DenyStatusHeader, "403")
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			done <- w
		}()
		var w *httptest.ResponseRecorder
		select {
		case w = <-done:
		case <-time.After(AuthMaxDelay + 3*time.Second):
			t.Fatalf("request %d: no answer within %s: a gateway would have timed out and taken its failure path", i+1, AuthMaxDelay+3*time.Second)
		}
		switch w.Code {
		case http.StatusOK:
			allowed++
		case http.StatusForbidden:
			denied++
			if s, err := strconv.Atoi(w.Header().Get("Retry-After")); err != nil || s < 1 {
				t.Errorf("request %d: refused with Retry-After %q, want the seconds until its turn", i+1, w.Header().Get("Retry-After"))
			}
		default:
			t.Errorf("request %d: status %d, want 200 or the deny status 403", i+1, w.Code)
		}
	}
	if allowed == 0 || denied == 0 {
		t.Errorf("allowed %d, denied %d: want the first request let through at once and those queued past %s refused", allowed, denied, AuthMaxDelay)
	}
}
