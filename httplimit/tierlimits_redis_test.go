package httplimit

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
)

// On Redis too, a refusal by one limit of several takes from none, and an organisation's
// clients share its month (the parts' keys are in several slots' worth of keys: the per-client
// ones and the organisation's).
func TestTierLimitsOnRedis(t *testing.T) {
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
	cfg := chatPolicy(rs)
	tier := chatTier()
	tier[1].Limit = limiter.Limit{Algorithm: limiter.TokenBucket, Rate: 100, Period: 24 * time.Hour} // no refill meanwhile
	cfg.Classes[0].TierLimits["default"] = tier
	p, err := NewPolicy(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(Config{Policy: p, Cost: func(r *http.Request) int64 {
		if r.Header.Get("X-Cost") == "100" {
			return 100
		}
		return 60
	}})
	if err != nil {
		t.Fatal(err)
	}
	h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	if w := chat(h, "alice", "acme", 60); w.Code != http.StatusOK {
		t.Fatalf("first: %d %s", w.Code, w.Body)
	}
	w := chat(h, "alice", "acme", 60)
	if w.Code != http.StatusTooManyRequests || !strings.Contains(w.Body.String(), `"refused_by":["tpm"]`) {
		t.Fatalf("second: %d %s, want 429 refused by tpm", w.Code, w.Body)
	}
	if u := partUsage(t, m, "user:alice", "chat", "rpm", org("acme")); u.Remaining != 4 {
		t.Errorf("rpm remaining %d, want 4", u.Remaining)
	}
	if w := chat(h, "bob", "acme", 100); w.Code != http.StatusOK {
		t.Fatalf("bob: %d %s", w.Code, w.Body)
	}
	u := partUsage(t, m, "user:alice", "chat", "monthly", org("acme"))
	if u.Used != 160 {
		t.Errorf("acme's month used %d, want 160 (alice's 60 and bob's 100, not alice's refused 60)", u.Used)
	}
	if got := w.Header().Get("RateLimit-Policy"); !slices.Contains(strings.Split(got, ", "), `"tpm";q=100;w=86400`) {
		t.Errorf("RateLimit-Policy %q", got)
	}
}
