package httplimit

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
)

func usageOf(t *testing.T, m *Middleware, key, class, endpoint string) UsageLimit {
	t.Helper()
	w := getUsage(m.UsageHandler(), "?key="+key)
	if w.Code != http.StatusOK {
		t.Fatalf("usage: status %d: %s", w.Code, w.Body)
	}
	var r UsageReport
	decodeJSON(t, w.Body.Bytes(), &r)
	return findUsage(t, r, class, endpoint)
}

// Reservations taken through the check API are counted in the usage answer until committed,
// on the memory store and on Redis; reading usage changes neither the count nor the budget.
func TestUsageCountsTheReservationsLeftOpen(t *testing.T) {
	srv := redistest.Single(t)
	client, err := redisstore.ClientConfig{URL: srv.URL()}.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	rs, err := redisstore.New(client, redisstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		store limiter.Store
	}{{"memory", limiter.NewMemoryStore(limiter.MemoryConfig{})}, {"redis", rs}} {
		t.Run(tc.name, func(t *testing.T) {
			// A day's bucket: no unit refills during the test.
			chat := oneClass("chat", limiter.Limit{Algorithm: limiter.TokenBucket, Rate: 1000, Period: 24 * time.Hour}, "POST /v1/chat")
			chat.CostFrom, chat.Estimate = CostFrom{JSON: "usage.total_tokens"}, Estimate{Default: 100}
			plain := oneClass("plain", limiter.PerMinute(limiter.FixedWindow, 1000), "GET /v1/plain")
			p, err := NewPolicy(PolicyConfig{Classes: []Class{chat, plain}, Store: tc.store})
			if err != nil {
				t.Fatal(err)
			}
			m, err := New(Config{Policy: p})
			if err != nil {
				t.Fatal(err)
			}
			check := httptest.NewServer(m.CheckHandler())
			defer check.Close()
			commit := httptest.NewServer(m.CommitHandler())
			defer commit.Close()
			key := "user:usage-" + tc.name
			if u := usageOf(t, m, key, "chat", "POST /v1/chat"); u.OpenReservations != 0 || u.Used != 0 {
				t.Fatalf("before any reservation: %+v, want none open, nothing used", u)
			}
			var tokens []string
			for range 2 {
				code, got := postJSON(t, check.URL, `{"key":"`+key+`","endpoint":"POST /v1/chat","reserve":true}`)
				tok, _ := got["reservation"].(string)
				if code != http.StatusOK || tok == "" {
					t.Fatalf("reserving check: %d %v", code, got)
				}
				tokens = append(tokens, tok)
			}
			for i := range 3 {
				u := usageOf(t, m, key, "chat", "POST /v1/chat")
				if u.OpenReservations != 2 || u.Used != 200 {
					t.Fatalf("read %d after two reservations of 100: %+v, want 2 open, 200 used", i+1, u)
				}
			}
			if u := usageOf(t, m, key, "plain", "GET /v1/plain"); u.OpenReservations != 0 {
				t.Fatalf("a class without cost_from: %+v, want 0 open", u)
			}
			if code, got := postJSON(t, commit.URL, `{"reservation":"`+tokens[0]+`","cost":50}`); code != http.StatusOK {
				t.Fatalf("commit: %d %v", code, got)
			}
			if u := usageOf(t, m, key, "chat", "POST /v1/chat"); u.OpenReservations != 1 || u.Used != 150 {
				t.Fatalf("after committing one at 50: %+v, want 1 open, 150 used", u)
			}
			if !strings.Contains(getUsage(m.UsageHandler(), "?key="+key).Body.String(), `"open_reservations":1`) {
				t.Error(`the answer does not say "open_reservations":1`)
			}
		})
	}
}
