package httplimit

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/rl-exporter/rl-exporter/decision"
	"github.com/rl-exporter/rl-exporter/limiter"
)

// setupChatLive is setupChat with a free tier beside the default and live changes of the chat
// class's limits.
func setupChatLive(t *testing.T, live map[string]decision.LiveLimit) (*Middleware, http.Handler, *Policy) {
	t.Helper()
	clk := newClock()
	cfg := chatPolicy(limiter.NewMemoryStore(limiter.MemoryConfig{Now: clk.Now}))
	cfg.Tiers = []string{"default", "free"}
	cfg.Classes[0].Live = live
	return setupChatWith(t, cfg, clk)
}

// limitOf is the EndpointLimit of class chat's limit name on tier.
func limitOf(t *testing.T, p *Policy, tier, name string) EndpointLimit {
	t.Helper()
	for _, el := range p.Limits() {
		if el.Class == "chat" && el.PlanTier == tier && el.Name == name {
			return el
		}
	}
	t.Fatalf("no limit %s of chat on tier %s in %+v", name, tier, p.Limits())
	return EndpointLimit{}
}

func TestTierLimitsALiveChangeAddressesOneLimitByNameAndLeavesTheOthers(t *testing.T) {
	const source = "rl:config:chat:default:rpm"
	m, h, p := setupChatLive(t, map[string]decision.LiveLimit{
		LiveAt("default", "rpm"): {Limit: limiter.PerMinute(limiter.SlidingWindow, 2), RolloutPercent: 100, Source: source},
	})
	for i := range 2 {
		if w := chat(h, "alice", "acme", 10); w.Code != http.StatusOK {
			t.Fatalf("request %d: %d %s", i+1, w.Code, w.Body)
		} else if pol := w.Header().Get("RateLimit-Policy"); !strings.Contains(pol, `"rpm";q=2;`) || !strings.Contains(pol, `"tpm";q=100;`) {
			t.Fatalf("RateLimit-Policy %q: want rpm's live quota 2 beside tpm's configured 100", pol)
		}
	}
	w := chat(h, "alice", "acme", 10)
	if w.Code != http.StatusTooManyRequests || !strings.Contains(w.Body.String(), `"refused_by":["rpm"]`) {
		t.Fatalf("third request: %d %s, want 429 refused_by [rpm] (the live 2 a minute, not the file's 5)", w.Code, w.Body)
	}
	if u := partUsage(t, m, "user:alice", "chat", "tpm", nil); u.Remaining != 80 || u.Live != "" {
		t.Errorf("tpm: remaining %d live %q, want 80 and the file's limit", u.Remaining, u.Live)
	}
	if u := partUsage(t, m, "user:alice", "chat", "rpm", nil); u.Quota != 2 || u.Live != source {
		t.Errorf("rpm usage: quota %d live %q, want 2 from %s", u.Quota, u.Live, source)
	}
	el := limitOf(t, p, "default", "rpm")
	if el.Limit.Rate != 2 || el.Configured.Rate != 5 || el.Source != source || el.RolloutPercent != 100 {
		t.Errorf("Limits() rpm %+v: want the live 2 in force, the file's 5 configured, source %s", el, source)
	}
	if el := limitOf(t, p, "default", "tpm"); el.Source != SourceFile {
		t.Errorf("Limits() tpm source %q, want %s", el.Source, SourceFile)
	}
	// The free tier shares the default tier's list and has no change of its own.
	if el := limitOf(t, p, "free", "rpm"); el.Limit.Rate != 5 || el.Source != SourceFile {
		t.Errorf("free tier's rpm %+v: want the file's 5, untouched by default's change", el)
	}
}

func TestTierLimitsALiveChangeInShadowCountsBesideTheConfiguredLimit(t *testing.T) {
	const source = "rl:config:chat:default:rpm"
	m, h, p := setupChatLive(t, map[string]decision.LiveLimit{
		LiveAt("default", "rpm"): {Limit: limiter.PerMinute(limiter.SlidingWindow, 1), RolloutPercent: 100, Shadow: true, Source: source},
	})
	for i := range 3 {
		if w := chat(h, "alice", "acme", 1); w.Code != http.StatusOK {
			t.Fatalf("request %d: %d, want 200: a shadow change refuses nothing", i+1, w.Code)
		} else if pol := w.Header().Get("RateLimit-Policy"); !strings.Contains(pol, `"rpm";q=5;`) {
			t.Fatalf("RateLimit-Policy %q: want rpm's configured 5", pol)
		}
	}
	rep, err := m.Usage(t.Context(), "user:alice", "")
	if err != nil {
		t.Fatal(err)
	}
	var enforced, shadow *UsageLimit
	for _, l := range rep.Limits {
		for i, part := range l.Limits {
			if l.Class == "chat" && part.Name == "rpm" {
				if part.Live == source {
					shadow = &l.Limits[i]
				} else {
					enforced = &l.Limits[i]
				}
			}
		}
	}
	if enforced == nil || enforced.Remaining != 2 || enforced.Shadow {
		t.Errorf("enforced rpm %+v: want 2 of the file's 5 left, enforced", enforced)
	}
	if shadow == nil || shadow.Quota != 1 || !shadow.Shadow {
		t.Fatalf("shadow rpm %+v: want the live change's quota 1, shadow, on a state of its own", shadow)
	}
	if el := limitOf(t, p, "default", "rpm"); el.Limit.Rate != 5 || !el.LiveShadow || el.Source != source {
		t.Errorf("Limits() rpm %+v: want the file's 5 in force, the change in shadow", el)
	}
}

func TestTierLimitsALiveChangeOfOneLimitRollsOutToAShareOfTheClients(t *testing.T) {
	const n = 2000
	_, h, _ := setupChatLive(t, map[string]decision.LiveLimit{
		LiveAt("default", "rpm"): {Limit: limiter.PerMinute(limiter.SlidingWindow, 1), RolloutPercent: 30, Source: "rl:config:chat:default:rpm"},
		LiveAt("default", "tpm"): {Limit: limiter.PerMinute(limiter.TokenBucket, 50), RolloutPercent: 60, Source: "rl:config:chat:default:tpm"},
	})
	covered := 0
	for i := range n {
		u := fmt.Sprintf("u%d", i)
		if w := chat(h, u, "", 1); w.Code != http.StatusOK {
			t.Fatalf("%s's first request: %d", u, w.Code)
		}
		w := chat(h, u, "", 1)
		b := decision.RolloutBucket("user:" + u)
		wantRPM, wantTPM := b < 30, b < 60
		if refused := w.Code == http.StatusTooManyRequests; refused != wantRPM {
			t.Fatalf("%s (bucket %d) second request: %d, want refused %v by rpm's change at 30 %%", u, b, w.Code, wantRPM)
		}
		if got := strings.Contains(w.Header().Get("RateLimit-Policy"), `"tpm";q=50;`); got != wantTPM {
			t.Fatalf("%s (bucket %d): RateLimit-Policy %q, want tpm's change at 60 %% %v", u, b, w.Header().Get("RateLimit-Policy"), wantTPM)
		}
		if wantRPM {
			covered++
		}
	}
	if covered < n*30/100-100 || covered > n*30/100+100 {
		t.Errorf("%d of %d clients under rpm's change at 30 %%", covered, n)
	}
}

func TestTierLimitsALiveChangeNamingNoLimitIsRefusedByName(t *testing.T) {
	store := limiter.NewMemoryStore(limiter.MemoryConfig{})
	for _, tc := range []struct {
		key, want string
	}{
		{LiveAt("default", "rph"), `no limit named "rph" (rpm, tpm, monthly)`},
		{"default", `names one of them (rpm, tpm, monthly)`},
		{LiveAt("gold", "rpm"), `unknown tier "gold"`},
	} {
		cfg := chatPolicy(store)
		cfg.Classes[0].Live = map[string]decision.LiveLimit{tc.key: {Limit: limiter.PerMinute(limiter.FixedWindow, 1), RolloutPercent: 100, Source: "k"}}
		if _, err := NewPolicy(cfg); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `class "chat"`) {
			t.Errorf("live at %s: %v, want an error naming class chat and %s", tc.key, err, tc.want)
		}
	}
	cfg := chatPolicy(store)
	cfg.Classes[2].Live = map[string]decision.LiveLimit{LiveAt("default", "x"): {Limit: limiter.PerMinute(limiter.FixedWindow, 1), RolloutPercent: 100, Source: "k"}}
	if _, err := NewPolicy(cfg); err == nil || !strings.Contains(err.Error(), "the tier has one limit") {
		t.Errorf("a named live change of a single limit: %v", err)
	}
}
