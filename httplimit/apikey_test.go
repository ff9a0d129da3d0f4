package httplimit

import (
	"fmt"
	"strings"
	"testing"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// apiKeyPolicy is a free (2 a minute) / pro (100 a minute) policy where
// alice is a pro user id and pro-key a pro API key.
func apiKeyPolicy(allowUnknown bool) PolicyConfig {
	return PolicyConfig{
		Tiers: []string{"free", "pro"}, DefaultTier: "free",
		Classes: []Class{{Name: "default", Limits: map[string]limiter.Limit{
			"free": limiter.PerMinute(limiter.FixedWindow, 2),
			"pro":  limiter.PerMinute(limiter.FixedWindow, 100),
		}}},
		Identity: IdentityConfig{
			UserHeader: "X-User-ID", TrustedHeaderPeers: testGateway,
			APIKeyHeaders: []string{"X-API-Key"}, AllowUnknownAPIKeys: allowUnknown,
			TierByKey:    map[string]string{"alice": "pro"},
			TierByAPIKey: map[string]string{"pro-key": "pro"},
		},
	}
}

func TestAnAPIKeyEqualToAProUserIDGetsNeitherTheUsersTierNorItsBudget(t *testing.T) {
	for _, allowUnknown := range []bool{false, true} {
		t.Run(fmt.Sprintf("unknown keys allowed: %v", allowUnknown), func(t *testing.T) {
			_, h, rec := setup(t, apiKeyPolicy(allowUnknown), newClock())
			// The user alice, through the gateway: pro.
			do(h, "GET", "/", "192.0.2.1:1", map[string]string{"X-User-ID": "alice"})
			user := rec.all()[0]
			if clientOf(user.Key) != "user:alice" || user.PlanTier != "pro" {
				t.Fatalf("the user alice: keyed by %q on %q, want user:alice on pro", clientOf(user.Key), user.PlanTier)
			}
			// A client presenting alice as its API key, from anywhere.
			w := do(h, "GET", "/", "203.0.113.7:1", map[string]string{"X-API-Key": "alice"})
			key := rec.all()[1]
			if key.PlanTier != "free" || w.Header().Get("X-RateLimit-Limit") != "2" {
				t.Errorf("X-API-Key: alice: tier %q, X-RateLimit-Limit %q; want free and 2", key.PlanTier, w.Header().Get("X-RateLimit-Limit"))
			}
			if key.Key == user.Key {
				t.Errorf("X-API-Key: alice shares the user alice's limiter key %q", key.Key)
			}
			want := "ip:203.0.113.7"
			if allowUnknown {
				want = "apikey:"
			}
			if got := clientOf(key.Key); !strings.HasPrefix(got, want) {
				t.Errorf("X-API-Key: alice keyed by %q, want %s…", got, want)
			}
			// A known API key still gets its own tier.
			do(h, "GET", "/", "203.0.113.7:1", map[string]string{"X-API-Key": "pro-key"})
			if k := rec.all()[2]; !strings.HasPrefix(clientOf(k.Key), "apikey:") || k.PlanTier != "pro" {
				t.Errorf("X-API-Key: pro-key keyed by %q on %q, want an apikey on pro", clientOf(k.Key), k.PlanTier)
			}
		})
	}
}

func TestAUserIDEqualToAProAPIKeyDoesNotGetTheKeysTier(t *testing.T) {
	_, h, rec := setup(t, apiKeyPolicy(false), newClock())
	do(h, "GET", "/", "192.0.2.1:1", map[string]string{"X-User-ID": "pro-key"})
	if r := rec.all()[0]; clientOf(r.Key) != "user:pro-key" || r.PlanTier != "free" {
		t.Errorf("user id pro-key: keyed by %q on %q, want user:pro-key on free", clientOf(r.Key), r.PlanTier)
	}
}

func TestRotatingUnknownAPIKeysCannotEscapeTheLimitByDefault(t *testing.T) {
	_, h, rec := setup(t, apiKeyPolicy(false), newClock())
	admitted := 0
	for i := range 50 {
		if do(h, "GET", "/", "203.0.113.7:1", map[string]string{"X-API-Key": fmt.Sprint("rotated-", i)}).Code == 200 {
			admitted++
		}
	}
	if admitted != 2 {
		t.Errorf("50 requests with 50 invented API keys from one address: %d admitted, want the free limit of 2", admitted)
	}
	keys := map[string]bool{}
	for _, r := range rec.all() {
		keys[r.Key] = true
	}
	if len(keys) != 1 {
		t.Errorf("50 invented API keys made %d limiter keys, want 1 (the client address)", len(keys))
	}
}

func TestRotatingUnknownAPIKeysEachGetABudgetOnlyWhenExplicitlyAllowed(t *testing.T) {
	_, h, _ := setup(t, apiKeyPolicy(true), newClock())
	admitted := 0
	for i := range 10 {
		if do(h, "GET", "/", "203.0.113.7:1", map[string]string{"X-API-Key": fmt.Sprint("rotated-", i)}).Code == 200 {
			admitted++
		}
	}
	if admitted != 10 {
		t.Errorf("with AllowUnknownAPIKeys, 10 distinct API keys: %d admitted, want 10 (one budget each)", admitted)
	}
}
