package httplimit

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

const gatewayPeer = "192.0.2.1:1000" // in testGateway

// chatTier is the published-table tier of the tests: requests per minute per client, tokens
// (the request's cost) per minute per client, and a calendar month per organisation, named by
// the gateway's X-Org-ID.
func chatTier() []TierLimit {
	return []TierLimit{
		{Name: "rpm", Limit: limiter.PerMinute(limiter.SlidingWindow, 5), Unit: UnitRequests},
		{Name: "tpm", Limit: limiter.PerMinute(limiter.TokenBucket, 100), Unit: UnitCost},
		{Name: "monthly", Limit: limiter.PerCalendar(300, &limiter.Calendar{Unit: limiter.Month}), Unit: UnitCost,
			Scope: Scope{Kind: ScopeHeader, Header: "X-Org-ID"}},
	}
}

func chatPolicy(store limiter.Store) PolicyConfig {
	return PolicyConfig{
		Store: store,
		Classes: []Class{
			{Name: "chat", Routes: []string{"POST /v1/chat"}, TierLimits: map[string][]TierLimit{"default": chatTier()}},
			{Name: "search", Routes: []string{"GET /search"}, TierLimits: map[string][]TierLimit{"default": {
				{Name: "per-client", Limit: limiter.PerMinute(limiter.FixedWindow, 10)},
				{Name: "backend", Limit: limiter.PerMinute(limiter.FixedWindow, 3), Scope: Scope{Kind: ScopeGlobal}},
			}}},
			{Name: "default", Limits: map[string]limiter.Limit{"default": limiter.PerMinute(limiter.FixedWindow, 100)}},
		},
		DefaultClass: "default",
		Identity:     IdentityConfig{UserHeader: "X-User-ID", TrustedHeaderPeers: testGateway},
	}
}

// setupChat is setup with the request's cost read from its X-Cost header.
func setupChat(t *testing.T, store limiter.Store, clk *fakeClock) (*Middleware, http.Handler) {
	t.Helper()
	m, h, _ := setupChatWith(t, chatPolicy(store), clk)
	return m, h
}

// setupChatWith is setupChat of cfg, answering its policy too.
func setupChatWith(t *testing.T, cfg PolicyConfig, clk *fakeClock) (*Middleware, http.Handler, *Policy) {
	t.Helper()
	p, err := NewPolicy(cfg)
	if err != nil {
		t.Fatalf("NewPolicy: %v", err)
	}
	m, err := New(Config{Policy: p, Now: clk.Now, Cost: func(r *http.Request) int64 {
		n, err := strconv.ParseInt(r.Header.Get("X-Cost"), 10, 64)
		if err != nil {
			return 1
		}
		return n
	}})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m, m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })), p
}

func chat(h http.Handler, user, org string, cost int) *httptestRecorder {
	hdr := map[string]string{"X-User-ID": user, "X-Cost": strconv.Itoa(cost)}
	if org != "" {
		hdr["X-Org-ID"] = org
	}
	return do(h, "POST", "/v1/chat", gatewayPeer, hdr)
}

// partUsage is the usage of one named limit of class for client, with the request headers hdr
// naming the scopes' values.
func partUsage(t *testing.T, m *Middleware, client, class, name string, hdr http.Header) UsageLimit {
	t.Helper()
	rep, err := m.UsageScoped(context.Background(), client, "", hdr, nil)
	if err != nil {
		t.Fatalf("usage: %v", err)
	}
	for _, l := range rep.Limits {
		if l.Class != class {
			continue
		}
		for _, p := range l.Limits {
			if p.Name == name {
				return p
			}
		}
	}
	t.Fatalf("no usage of %s %s in %+v", class, name, rep.Limits)
	return UsageLimit{}
}

func org(v string) http.Header { return http.Header{"X-Org-Id": {v}} }

func TestTierLimitsARefusalTakesFromNoneAndNamesItsLimits(t *testing.T) {
	clk := newClock()
	store := limiter.NewMemoryStore(limiter.MemoryConfig{Now: clk.Now})
	m, h := setupChat(t, store, clk)

	w := chat(h, "alice", "acme", 60)
	if w.Code != http.StatusOK {
		t.Fatalf("first request: %d %s", w.Code, w.Body)
	}
	pol := w.Header().Get("RateLimit-Policy")
	for _, want := range []string{`"rpm";q=5;w=60;qu="requests"`, `"tpm";q=100;w=60`, `"monthly";q=300;w=`} {
		if !strings.Contains(pol, want) {
			t.Errorf("RateLimit-Policy %q lacks %s", pol, want)
		}
	}
	if n := strings.Count(pol, ";q="); n != 3 {
		t.Errorf("RateLimit-Policy %q lists %d policies, want 3", pol, n)
	}
	// rpm 4/5, tpm 40/100, monthly 240/300: tpm is the closest to its end.
	if got := w.Header().Get("RateLimit"); !strings.HasPrefix(got, `"tpm";r=40;`) {
		t.Errorf("RateLimit %q: want tpm's, the lowest remaining share", got)
	}
	if got := w.Header().Get("X-RateLimit-Remaining"); got != "40" {
		t.Errorf("X-RateLimit-Remaining %q, want tpm's 40", got)
	}

	// 60 tokens more than tpm's 40: refused by tpm alone, taking from no limit.
	w = chat(h, "alice", "acme", 60)
	if w.Code != http.StatusTooManyRequests {
		t.Fatalf("second request: %d, want 429", w.Code)
	}
	var body struct {
		Error     string   `json:"error"`
		RefusedBy []string `json:"refused_by"`
		Retry     int64    `json:"retry_after"`
	}
	decodeJSON(t, w.Body.Bytes(), &body)
	if !slices.Equal(body.RefusedBy, []string{"tpm"}) || body.Error != "rate_limit_exceeded" {
		t.Errorf("429 body %s: want refused_by [tpm]", w.Body)
	}
	if got := w.Header().Get("Retry-After"); got != "12" { // 20 tokens at 100 a minute
		t.Errorf("Retry-After %q, want 12", got)
	}
	if u := partUsage(t, m, "user:alice", "chat", "rpm", org("acme")); u.Remaining != 4 {
		t.Errorf("rpm remaining %d after a refusal by tpm, want 4 (unchanged)", u.Remaining)
	}
	if u := partUsage(t, m, "user:alice", "chat", "monthly", org("acme")); u.Remaining != 240 {
		t.Errorf("monthly remaining %d after a refusal by tpm, want 240 (unchanged)", u.Remaining)
	}
	if u := partUsage(t, m, "user:alice", "chat", "tpm", nil); u.Remaining != 40 {
		t.Errorf("tpm remaining %d, want 40", u.Remaining)
	}

	// Two clients of one organisation share its month: bob's 100 leave alice 140.
	if w := chat(h, "bob", "acme", 100); w.Code != http.StatusOK {
		t.Fatalf("bob: %d %s", w.Code, w.Body)
	}
	if u := partUsage(t, m, "user:alice", "chat", "monthly", org("acme")); u.Remaining != 140 || u.Used != 160 {
		t.Errorf("acme's month seen from alice: used %d remaining %d, want 160 and 140", u.Used, u.Remaining)
	}
	if w := chat(h, "carol", "acme", 100); w.Code != http.StatusOK {
		t.Fatalf("carol: %d %s", w.Code, w.Body)
	}
	// Another organisation has a month of its own.
	if w := chat(h, "erin", "globex", 100); w.Code != http.StatusOK {
		t.Fatalf("erin of globex: %d %s", w.Code, w.Body)
	}

	// bob's tokens are spent (retry in a minute) and acme's month is down to 40 (retry at the
	// month's end): Retry-After waits for both.
	w = chat(h, "bob", "acme", 100)
	if w.Code != http.StatusTooManyRequests {
		t.Fatalf("bob again: %d, want 429", w.Code)
	}
	decodeJSON(t, w.Body.Bytes(), &body)
	if !slices.Equal(body.RefusedBy, []string{"tpm", "monthly"}) {
		t.Errorf("refused_by %v, want [tpm monthly]", body.RefusedBy)
	}
	now := clk.Now().UTC()
	monthEnd := time.Date(now.Year(), now.Month()+1, 1, 0, 0, 0, 0, time.UTC)
	want := int64(monthEnd.Sub(now) / time.Second)
	if got, _ := strconv.ParseInt(w.Header().Get("Retry-After"), 10, 64); got < want || got > want+1 {
		t.Errorf("Retry-After %d, want the month's end, %d s away (the max over tpm and monthly)", got, want)
	}
	if body.Retry < want {
		t.Errorf("body retry_after %d, want %d", body.Retry, want)
	}
}

func TestTierLimitsGlobalScopeIsOneBudgetForEveryClient(t *testing.T) {
	clk := newClock()
	_, h := setupChat(t, limiter.NewMemoryStore(limiter.MemoryConfig{Now: clk.Now}), clk)
	for _, u := range []string{"a", "b", "c"} {
		if w := do(h, "GET", "/search", gatewayPeer, map[string]string{"X-User-ID": u}); w.Code != http.StatusOK {
			t.Fatalf("user %s: %d", u, w.Code)
		}
	}
	w := do(h, "GET", "/search", gatewayPeer, map[string]string{"X-User-ID": "d"})
	if w.Code != http.StatusTooManyRequests {
		t.Fatalf("a fourth client: %d, want 429 by the global backend limit", w.Code)
	}
	if !strings.Contains(w.Body.String(), `"refused_by":["backend"]`) {
		t.Errorf("body %s: want refused_by [backend]", w.Body)
	}
}

func TestTierLimitsHeaderScopeFromAnUntrustedPeerOrMissingFallsBackToTheClient(t *testing.T) {
	clk := newClock()
	m, h := setupChat(t, limiter.NewMemoryStore(limiter.MemoryConfig{Now: clk.Now}), clk)
	// Not from the gateway: X-Org-ID is the client's own word, and the client is its address.
	w := do(h, "POST", "/v1/chat", "203.0.113.9:1", map[string]string{"X-Org-ID": "acme", "X-Cost": "100"})
	if w.Code != http.StatusOK {
		t.Fatalf("untrusted peer: %d %s", w.Code, w.Body)
	}
	if u := partUsage(t, m, "user:alice", "chat", "monthly", org("acme")); u.Used != 0 {
		t.Errorf("acme's month used %d by a header from an untrusted peer, want 0", u.Used)
	}
	if u := partUsage(t, m, "ip:203.0.113.9", "chat", "monthly", nil); u.Used != 100 {
		t.Errorf("the client's own fallback month used %d, want 100", u.Used)
	}
	// From the gateway without the header: the client's own budget, counted.
	if w := chat(h, "dave", "", 50); w.Code != http.StatusOK {
		t.Fatalf("no org: %d", w.Code)
	}
	if u := partUsage(t, m, "user:dave", "chat", "monthly", nil); u.Used != 50 {
		t.Errorf("dave's fallback month used %d, want 50", u.Used)
	}
	if got := m.ScopeFallbacks(); got != 2 {
		t.Errorf("ScopeFallbacks %d, want 2", got)
	}
}

func TestTierLimitsUsageListsEveryLimit(t *testing.T) {
	clk := newClock()
	m, h := setupChat(t, limiter.NewMemoryStore(limiter.MemoryConfig{Now: clk.Now}), clk)
	chat(h, "alice", "acme", 30)
	w := getUsage(m.UsageHandler(), "?key=user:alice&header.X-Org-ID=acme")
	if w.Code != http.StatusOK {
		t.Fatalf("usage: %d %s", w.Code, w.Body)
	}
	var rep UsageReport
	decodeJSON(t, w.Body.Bytes(), &rep)
	var names []string
	for _, l := range rep.Limits {
		if l.Class != "chat" {
			continue
		}
		for _, p := range l.Limits {
			names = append(names, p.Name)
			if p.Name == "monthly" && p.Used != 30 {
				t.Errorf("monthly used %d, want 30", p.Used)
			}
		}
		if l.Quota != 100 || l.Used != 30 {
			t.Errorf("chat's top-level figures %+v: want the lowest share's, tpm's 30 of 100", l)
		}
	}
	if !slices.Equal(names, []string{"rpm", "tpm", "monthly"}) {
		t.Errorf("chat's limits %v, want rpm, tpm, monthly", names)
	}
	// A single-limit class keeps its answer: no parts.
	for _, l := range rep.Limits {
		if l.Class == "default" && l.Limits != nil {
			t.Errorf("the single-limit class gained parts: %+v", l)
		}
	}
}

func TestTierLimitsCheckAPINamesTheRefusingLimits(t *testing.T) {
	clk := newClock()
	m, _ := setupChat(t, limiter.NewMemoryStore(limiter.MemoryConfig{Now: clk.Now}), clk)
	h := m.CheckHandler()
	check := func(body string) (int, CheckResponse) {
		w := postCheck(h, "application/json", body)
		var resp CheckResponse
		decodeJSON(t, w.Body.Bytes(), &resp)
		return w.Code, resp
	}
	if code, _ := check(`{"key":"user:alice","endpoint":"POST /v1/chat","cost":90,"headers":{"X-Org-ID":"acme"}}`); code != 200 {
		t.Fatalf("check: %d", code)
	}
	// A dry run says which limits would refuse, taking nothing.
	code, resp := check(`{"key":"user:alice","endpoint":"POST /v1/chat","cost":20,"dry_run":true,"headers":{"X-Org-ID":"acme"}}`)
	if code != http.StatusTooManyRequests || !slices.Equal(resp.RefusedBy, []string{"tpm"}) {
		t.Errorf("dry run: %d %+v, want 429 refused by tpm", code, resp)
	}
	if u := partUsage(t, m, "user:alice", "chat", "rpm", nil); u.Remaining != 4 {
		t.Errorf("rpm remaining %d after a dry run, want 4", u.Remaining)
	}
}

func TestTierLimitsCompileErrorsNameClassTierAndLimit(t *testing.T) {
	store := limiter.NewMemoryStore(limiter.MemoryConfig{})
	rpm := limiter.PerMinute(limiter.FixedWindow, 5)
	lease, yes := &limiter.LeaseLimit{Limit: 2, TTL: time.Minute}, true
	base := func(list []TierLimit, edit func(*Class)) PolicyConfig {
		c := Class{Name: "chat", TierLimits: map[string][]TierLimit{"default": list}}
		if edit != nil {
			edit(&c)
		}
		return PolicyConfig{Store: store, Classes: []Class{c},
			Identity: IdentityConfig{UserHeader: "X-User-ID", TrustedHeaderPeers: testGateway}}
	}
	cases := []struct {
		name string
		cfg  PolicyConfig
		want string
	}{
		{"duplicate", base([]TierLimit{{Name: "a", Limit: rpm}, {Name: "a", Limit: rpm}}, nil), `limit "a" listed twice`},
		{"bad name", base([]TierLimit{{Name: "a b", Limit: rpm}}, nil), `limit "a b"`},
		{"lease alone", base([]TierLimit{{Name: "c", Lease: lease}}, nil), `limit "c" is the list's only limit`},
		{"two leases", base([]TierLimit{{Name: "a", Limit: rpm}, {Name: "c", Lease: lease}, {Name: "d", Lease: lease}}, nil), `limit "d": a second concurrency limit`},
		{"shadow lease", base([]TierLimit{{Name: "a", Limit: rpm}, {Name: "c", Lease: lease, Shadow: &yes}}, nil), `limit "c": a concurrency limit of several is enforced or shadow as its class is`},
		{"lease of cost", base([]TierLimit{{Name: "a", Limit: rpm}, {Name: "c", Lease: lease, Unit: UnitCost}}, nil), `limit "c": unit "cost"`},
		{"lease beside shadows", base([]TierLimit{{Name: "a", Limit: rpm, Shadow: &yes}, {Name: "c", Lease: lease}}, nil), `every rate limit beside the concurrency limit "c" is shadow`},
		{"no header", base([]TierLimit{{Name: "o", Limit: rpm, Scope: Scope{Kind: ScopeHeader}}}, nil), `limit "o": scope header names no header`},
		{"no claim", base([]TierLimit{{Name: "o", Limit: rpm, Scope: Scope{Kind: ScopeClaim}}}, nil), `limit "o": scope claim names no claim`},
		{"both", base([]TierLimit{{Name: "a", Limit: rpm}}, func(c *Class) { c.Limits = map[string]limiter.Limit{"default": rpm} }), `tier "default": both Limits and TierLimits`},
		{"empty", base(nil, nil), `tier "default": TierLimits lists no limit`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewPolicy(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `class "chat"`) {
				t.Errorf("err %v, want one naming class chat and %s", err, tc.want)
			}
		})
	}
	// A header scope without trusted header peers is believed from nobody.
	cfg := base([]TierLimit{{Name: "o", Limit: rpm, Scope: Scope{Kind: ScopeHeader, Header: "X-Org-ID"}}}, nil)
	cfg.Identity = IdentityConfig{}
	if _, err := NewPolicy(cfg); err == nil || !strings.Contains(err.Error(), "TrustedHeaderPeers") {
		t.Errorf("header scope without trusted peers: %v", err)
	}
}
