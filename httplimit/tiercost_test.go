package httplimit

import (
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/eventually"
	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
)

// llmTier is the OpenAI-style list of the tests: requests per minute, tokens per minute and a
// day of tokens per client, a month of tokens per organisation (X-Org-ID), and a cap of
// requests in flight; the tokens are read from the response's X-Tokens.
func llmTier() []TierLimit {
	return []TierLimit{
		{Name: "rpm", Limit: limiter.PerMinute(limiter.SlidingWindow, 5), Unit: UnitRequests},
		{Name: "tpm", Limit: limiter.Limit{Algorithm: limiter.TokenBucket, Rate: 1000, Period: time.Hour}},
		{Name: "daily", Limit: limiter.Limit{Algorithm: limiter.FixedWindow, Rate: 5000, Period: 24 * time.Hour}},
		{Name: "monthly", Limit: limiter.PerCalendar(20000, &limiter.Calendar{Unit: limiter.Month}),
			Scope: Scope{Kind: ScopeHeader, Header: "X-Org-ID"}},
		{Name: "inflight", Lease: &limiter.LeaseLimit{Limit: 4, TTL: time.Minute}},
	}
}

// setupLLM is the middleware of the llm class on store.
func setupLLM(t *testing.T, store limiter.Store) *Middleware {
	t.Helper()
	return llmClassMiddleware(t, store, llmTier(), Config{})
}

// llmClassMiddleware is the middleware of cfg with the policy of an llm class of tier (its cost
// from X-Tokens, estimated at 50) on store, beside a default class.
func llmClassMiddleware(t *testing.T, store limiter.Store, tier []TierLimit, cfg Config) *Middleware {
	t.Helper()
	c := Class{Name: "llm", Routes: []string{"POST /v1/chat"}, TierLimits: map[string][]TierLimit{"default": tier},
		CostFrom: CostFrom{Header: "X-Tokens"}, Estimate: Estimate{Default: 50}}
	p, err := NewPolicy(PolicyConfig{Store: store, DefaultClass: "default", Classes: []Class{c,
		{Name: "default", Limits: map[string]limiter.Limit{"default": limiter.PerMinute(limiter.FixedWindow, 100)}}},
		Identity: IdentityConfig{UserHeader: "X-User-ID", TrustedHeaderPeers: testGateway}})
	if err != nil {
		t.Fatalf("NewPolicy: %v", err)
	}
	cfg.Policy = p
	m, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m
}

// llmHandler serves the llm class through m: the upstream answers X-Tokens with the request's
// X-Actual, or fails (ReportUpstreamFailure) when X-Actual is "fail"; during, when set, is
// called while the request is being served.
func llmHandler(m *Middleware, during func()) http.Handler {
	return m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if during != nil {
			during()
		}
		if r.Header.Get("X-Actual") == "fail" {
			ReportUpstreamFailure(w)
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		w.Header().Set("X-Tokens", r.Header.Get("X-Actual"))
		w.WriteHeader(http.StatusOK)
	}))
}

func llmStores(t *testing.T) map[string]limiter.Store {
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
	return map[string]limiter.Store{"memory": limiter.NewMemoryStore(limiter.MemoryConfig{}), "redis": rs}
}

// used is each named limit's used figure and open reservations for alice of acme.
func used(t *testing.T, m *Middleware, user string) (map[string]int64, map[string]int64) {
	t.Helper()
	u, open := map[string]int64{}, map[string]int64{}
	for _, name := range []string{"rpm", "tpm", "daily", "monthly"} {
		p := partUsage(t, m, "user:"+user, "llm", name, org("acme"))
		u[name], open[name] = p.Used, p.OpenReservations
	}
	return u, open
}

// A class that reads its cost from the response (cost_from) with a list: each limit of cost
// holds the estimate while the request runs (usage counts it open) beside the lease of its
// concurrency limit, then is settled to the response's count, the lease released, given back below it, charged past it even beyond the quota; the limit of
// requests keeps 1; a later request is refused by the spent limit alone, which refused_by names.
func TestTierLimitsCostFromSettlesEveryLimitOfCost(t *testing.T) {
	for name, store := range llmStores(t) {
		t.Run(name, func(t *testing.T) {
			var m *Middleware
			var during map[string]int64
			var openDuring map[string]int64
			m = setupLLM(t, store)
			h := llmHandler(m, func() { during, openDuring = used(t, m, "alice") })
			send := func(actual string) *httptestRecorder {
				return do(h, "POST", "/v1/chat", gatewayPeer, map[string]string{"X-User-ID": "alice", "X-Org-ID": "acme", "X-Actual": actual})
			}
			settled := func(what string, want map[string]int64) {
				t.Helper()
				var got, open map[string]int64
				if !eventually.Within(5*time.Second, func() bool {
					got, open = used(t, m, "alice")
					lease := partUsage(t, m, "user:alice", "llm", "inflight", org("acme"))
					return equalCounts(got, want) && equalCounts(open, map[string]int64{"rpm": 0, "tpm": 0, "daily": 0, "monthly": 0}) &&
						lease.InFlight != nil && *lease.InFlight == 0
				}) {
					t.Fatalf("%s: used %s, open %s; want used %s, none open, no lease in flight", what, toString(got), toString(open), toString(want))
				}
			}
			if w := send("20"); w.Code != http.StatusOK {
				t.Fatalf("first request: %d %s", w.Code, w.Body)
			}
			if !equalCounts(during, map[string]int64{"rpm": 1, "tpm": 50, "daily": 50, "monthly": 50}) ||
				!equalCounts(openDuring, map[string]int64{"rpm": 0, "tpm": 1, "daily": 1, "monthly": 1}) {
				t.Errorf("while served: used %v, open %v; want the estimate of 50 held open on each limit of cost", during, openDuring)
			}
			settled("settled at 20", map[string]int64{"rpm": 1, "tpm": 20, "daily": 20, "monthly": 20})
			if w := send("fail"); w.Code != http.StatusBadGateway {
				t.Fatalf("failed upstream: %d", w.Code)
			}
			settled("an upstream that failed gives the estimate back", map[string]int64{"rpm": 2, "tpm": 20, "daily": 20, "monthly": 20})
			if w := send("1500"); w.Code != http.StatusOK {
				t.Fatalf("third request: %d %s", w.Code, w.Body)
			}
			settled("settled at 1500, past tpm's 1000", map[string]int64{"rpm": 3, "tpm": 1000, "daily": 1520, "monthly": 1520})
			w := send("10")
			var body RejectedBody
			decodeJSON(t, w.Body.Bytes(), &body)
			if w.Code != http.StatusTooManyRequests || !slices.Equal(body.RefusedBy, []string{"tpm"}) {
				t.Fatalf("after the charge: %d %+v, want 429 refused by tpm", w.Code, body)
			}
			settled("a refusal takes from none", map[string]int64{"rpm": 3, "tpm": 1000, "daily": 1520, "monthly": 1520})
		})
	}
}

func equalCounts(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func toString(m map[string]int64) string {
	s := ""
	for _, k := range []string{"rpm", "tpm", "daily", "monthly"} {
		s += k + "=" + strconv.FormatInt(m[k], 10) + " "
	}
	return s
}
