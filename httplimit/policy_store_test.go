package httplimit

import (
	"context"
	"sync"
	"testing"

	"github.com/rl-exporter/rl-exporter/decision"
	"github.com/rl-exporter/rl-exporter/limiter"
)

// namedStore is a memory store that remembers the keys it decided. It is
// a plain limiter.Store (Decide and Name only, the memory store held in a
// field, not embedded), so that every decision goes through its Decide
// whatever other ways the limiter has of calling a store that offers more.
type namedStore struct {
	mem  *limiter.MemoryStore
	mu   sync.Mutex
	keys []string
}

func (s *namedStore) Decide(ctx context.Context, key string, lim limiter.Limit, cost int64) (limiter.Decision, error) {
	s.mu.Lock()
	s.keys = append(s.keys, key)
	s.mu.Unlock()
	return s.mem.Decide(ctx, key, lim, cost)
}

func (s *namedStore) Name() string { return s.mem.Name() }

func (s *namedStore) decided() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.keys)
}

func TestEachTierDecidesOnTheStoreItsClassGivesIt(t *testing.T) {
	clk := newClock()
	newStore := func() *namedStore {
		return &namedStore{mem: limiter.NewMemoryStore(limiter.MemoryConfig{Now: clk.Now})}
	}
	policyStore, classStore, proStore, entStore := newStore(), newStore(), newStore(), newStore()
	_, h, _ := setup(t, PolicyConfig{
		Store: policyStore,
		Tiers: []string{"free", "pro", "ent", "trial"}, DefaultTier: "free",
		Classes: []Class{
			{Name: "billing", Routes: []string{"/billing/"}, Store: classStore,
				TierStores: map[string]limiter.Store{"pro": proStore, "ent": entStore},
				Limits: map[string]limiter.Limit{
					"free": limiter.PerMinute(limiter.GCRA, 2),
					"pro":  limiter.PerMinute(limiter.GCRA, 10),
				}},
			{Name: "default", Limits: map[string]limiter.Limit{"free": limiter.PerMinute(limiter.FixedWindow, 5)}},
		},
		DefaultClass: "default",
		Identity:     IdentityConfig{UserHeader: "X-User-ID", TierHeader: "X-Plan-Tier", TrustedHeaderPeers: testGateway},
	}, clk)
	cases := []struct {
		name      string
		path      string
		tier      string
		want      *namedStore
		wantLimit string
	}{
		{"a class's tier without a store of its own decides on the class's store", "/billing/x", "free", classStore, "2"},
		{"a tier given a store decides on it", "/billing/x", "pro", proStore, "10"},
		{"a tier without a limit but with a store decides the default tier's limit on its own store", "/billing/x", "ent", entStore, "2"},
		{"a tier with neither shares the default tier's limiter and store", "/billing/x", "trial", classStore, "2"},
		{"a class without stores decides on the policy's store", "/other", "pro", policyStore, "5"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := map[*namedStore]int{}
			for _, s := range []*namedStore{policyStore, classStore, proStore, entStore} {
				before[s] = s.decided()
			}
			w := do(h, "GET", c.path, "192.0.2.1:1", map[string]string{"X-User-ID": "u", "X-Plan-Tier": c.tier})
			if got := w.Header().Get("X-RateLimit-Limit"); got != c.wantLimit {
				t.Errorf("X-RateLimit-Limit %q, want %s", got, c.wantLimit)
			}
			for s, n := range before {
				want := n
				if s == c.want {
					want++
				}
				if got := s.decided(); got != want {
					t.Errorf("a store decided %d times, want %d (the right store: %v)", got-n, want-n, s == c.want)
				}
			}
		})
	}
	// The tier's key names the tier, so ent and trial never share a budget.
	if k := entStore.keys[0]; k != "billing|ent|/billing/|user:u" {
		t.Errorf("ent's key %q", k)
	}
}

func TestALiveLimitDecidesOnItsTiersStore(t *testing.T) {
	clk := newClock()
	policyStore := &namedStore{mem: limiter.NewMemoryStore(limiter.MemoryConfig{Now: clk.Now})}
	proStore := &namedStore{mem: limiter.NewMemoryStore(limiter.MemoryConfig{Now: clk.Now})}
	_, h, _ := setup(t, PolicyConfig{
		Store: policyStore, Tiers: []string{"free", "pro"}, DefaultTier: "free",
		Classes: []Class{{Name: "api", TierStores: map[string]limiter.Store{"pro": proStore},
			Limits: map[string]limiter.Limit{"free": limiter.PerMinute(limiter.GCRA, 2)},
			Live:   map[string]decision.LiveLimit{"pro": {Limit: limiter.PerMinute(limiter.GCRA, 7), RolloutPercent: 100, Source: "rl:config:api:pro"}},
		}},
		Identity: IdentityConfig{UserHeader: "X-User-ID", TierHeader: "X-Plan-Tier", TrustedHeaderPeers: testGateway},
	}, clk)
	w := do(h, "GET", "/x", "192.0.2.1:1", map[string]string{"X-User-ID": "u", "X-Plan-Tier": "pro"})
	if got := w.Header().Get("X-RateLimit-Limit"); got != "7" {
		t.Errorf("X-RateLimit-Limit %q, want the live limit 7", got)
	}
	if proStore.decided() != 1 || policyStore.decided() != 0 {
		t.Errorf("pro's store decided %d, the policy's %d; want the live limit on pro's store", proStore.decided(), policyStore.decided())
	}
}
