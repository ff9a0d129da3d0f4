package httplimit

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/eventually"
	"github.com/rl-exporter/rl-exporter/limiter"
)

// setCommitAnswer is the JSON of a commit of a tier of several limits, as a client reads it.
type setCommitAnswer struct {
	Estimate int64 `json:"estimate"`
	Actual   int64 `json:"actual"`
	Refunded int64 `json:"refunded"`
	Charged  int64 `json:"charged"`
	Limits   []struct {
		Name     string `json:"name"`
		Settled  bool   `json:"settled"`
		Estimate int64  `json:"estimate"`
		Actual   int64  `json:"actual"`
		Refunded int64  `json:"refunded"`
		Charged  int64  `json:"charged"`
	} `json:"limits"`
}

// post sends body to h at path and decodes the JSON answer into out.
func post(t *testing.T, h http.Handler, path, body string, out any) int {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, path, strings.NewReader(body)))
	if err := json.Unmarshal(w.Body.Bytes(), out); err != nil {
		t.Fatalf("%s %s: %d %q is not JSON: %v", path, body, w.Code, w.Body, err)
	}
	return w.Code
}

// llmMiddleware is setupLLM telling its costs to ev.
func llmMiddleware(t *testing.T, store limiter.Store, ev *costEvents) *Middleware {
	t.Helper()
	return llmClassMiddleware(t, store, llmTier(), Config{Costs: ev})
}

// usedNow waits until alice's limits of the llm class show want used and none open.
func usedNow(t *testing.T, m *Middleware, user, what string, want map[string]int64) {
	t.Helper()
	var got, open map[string]int64
	if !eventually.Within(5*time.Second, func() bool {
		got, open = used(t, m, user)
		return equalCounts(got, want) && equalCounts(open, map[string]int64{"rpm": 0, "tpm": 0, "daily": 0, "monthly": 0})
	}) {
		t.Fatalf("%s: used %s, open %s; want used %s, none open", what, toString(got), toString(open), toString(want))
	}
}

// A reserving check of a tier of several limits holds the estimate on each limit of cost and
// answers one token; the commit settles every one of them to the actual cost (rpm keeps its 1)
// and says what it did on each; a second commit is 409; a cancel gives every estimate back; a
// renewal renews each. The cost metrics count the request once, as one estimate was reserved.
func TestAReservingCheckOfSeveralLimitsAnswersATokenThatACommitSettlesOnEachLimit(t *testing.T) {
	for name, store := range llmStores(t) {
		t.Run(name, func(t *testing.T) {
			ev := &costEvents{}
			m := llmMiddleware(t, store, ev)
			check, commit := m.CheckHandler(), m.CommitHandler()
			const ask = `{"key":"user:alice","endpoint":"POST /v1/chat","reserve":true,"lease":true,"estimate":50,"headers":{"X-Org-ID":"acme"}}`
			var got CheckResponse
			if code := post(t, check, CheckPath, ask, &got); code != http.StatusOK || got.Reservation == "" || got.Lease == "" {
				t.Fatalf("reserving check: %d %+v, want 200 with a reservation and a lease", code, got)
			}
			tok := got.Reservation
			u, open := used(t, m, "alice")
			if !equalCounts(u, map[string]int64{"rpm": 1, "tpm": 50, "daily": 50, "monthly": 50}) ||
				!equalCounts(open, map[string]int64{"rpm": 0, "tpm": 1, "daily": 1, "monthly": 1}) {
				t.Fatalf("after the reserving check: used %v, open %v; want the estimate of 50 held open on each limit of cost", u, open)
			}
			var rn RenewResponse
			if code := post(t, m.RenewHandler(), RenewPath, `{"reservation":"`+tok+`"}`, &rn); code != http.StatusOK || !rn.Renewed {
				t.Fatalf("renew: %d %+v, want renewed", code, rn)
			}
			var c setCommitAnswer
			if code := post(t, commit, CommitPath, `{"reservation":"`+tok+`","cost":20}`, &c); code != http.StatusOK ||
				c.Estimate != 50 || c.Actual != 20 || len(c.Limits) != 3 {
				t.Fatalf("commit at 20: %d %+v, want 200, estimate 50, actual 20, three limits", code, c)
			}
			for i, want := range []string{"tpm", "daily", "monthly"} {
				l := c.Limits[i]
				if l.Name != want || !l.Settled || l.Estimate != 50 || l.Actual != 20 || l.Refunded != 30 || l.Charged != 0 {
					t.Errorf("limit %d: %+v, want %s settled: estimate 50, actual 20, 30 refunded", i, l, want)
				}
			}
			usedNow(t, m, "alice", "settled at 20", map[string]int64{"rpm": 1, "tpm": 20, "daily": 20, "monthly": 20})
			var again RejectedBody
			if code := post(t, commit, CommitPath, `{"reservation":"`+tok+`","cost":20}`, &again); code != http.StatusConflict || again.Error != "reservation_not_open" {
				t.Fatalf("second commit: %d %+v, want 409 reservation_not_open", code, again)
			}
			var rel ReleaseResponse
			if code := post(t, m.ReleaseHandler(), ReleasePath, `{"lease":"`+got.Lease+`"}`, &rel); code != http.StatusOK {
				t.Fatalf("release: %d %+v", code, rel)
			}

			// Charged past tpm's quota; then a cancel gives each estimate back whole.
			if code := post(t, check, CheckPath, ask, &got); code != http.StatusOK || got.Reservation == "" {
				t.Fatalf("second reserving check: %d %+v", code, got)
			}
			if code := post(t, commit, CommitPath, `{"reservation":"`+got.Reservation+`","cost":1500}`, &c); code != http.StatusOK ||
				len(c.Limits) != 3 || c.Limits[0].Charged != 1450 || c.Limits[2].Charged != 1450 {
				t.Fatalf("commit at 1500: %d %+v, want 1450 charged on each limit", code, c)
			}
			post(t, m.ReleaseHandler(), ReleasePath, `{"lease":"`+got.Lease+`"}`, &rel)
			usedNow(t, m, "alice", "settled at 1500", map[string]int64{"rpm": 2, "tpm": 1000, "daily": 1520, "monthly": 1520})
			var refused CheckResponse
			if code := post(t, check, CheckPath, ask, &refused); code != http.StatusTooManyRequests || refused.Reservation != "" ||
				len(refused.RefusedBy) != 1 || refused.RefusedBy[0] != "tpm" {
				t.Fatalf("after the charge: %d %+v, want 429 refused by tpm, no reservation", code, refused)
			}
			usedNow(t, m, "alice", "a refusal holds nothing", map[string]int64{"rpm": 2, "tpm": 1000, "daily": 1520, "monthly": 1520})

			ev.mu.Lock()
			defer ev.mu.Unlock()
			// Counted as the first limit's settle, held to its quota (decision.Counted): 1500 as 1000.
			if ev.reserved != 100 || len(ev.settled) != 2 || ev.settled[0].Actual != 20 || ev.settled[1].Actual != 1000 {
				t.Errorf("cost events: reserved %d, settled %+v; want 100 reserved, two requests settled at 20 and 1000", ev.reserved, ev.settled)
			}
		})
	}
}

// Without cost_from, "reserve": true holds the limits of unit cost (the caller reports the
// cost), and a cancel gives each estimate back; a tier whose every limit counts requests has
// nothing to hold and answers 400, as a reserving dry run does, taking nothing.
func TestAReservingCheckOfSeveralLimitsHoldsItsLimitsOfCost(t *testing.T) {
	clk := newClock()
	m, _ := setupChat(t, limiter.NewMemoryStore(limiter.MemoryConfig{Now: clk.Now}), clk)
	check := m.CheckHandler()
	var got CheckResponse
	if code := post(t, check, CheckPath, `{"key":"user:alice","endpoint":"POST /v1/chat","reserve":true,"estimate":40,"headers":{"X-Org-ID":"acme"}}`, &got); code != http.StatusOK || got.Reservation == "" {
		t.Fatalf("reserving check: %d %+v, want 200 with a reservation", code, got)
	}
	if u := partUsage(t, m, "user:alice", "chat", "monthly", org("acme")); u.Used != 40 {
		t.Fatalf("monthly: used %d, want the estimate of 40 held", u.Used)
	}
	var c setCommitAnswer
	if code := post(t, m.CommitHandler(), CommitPath, `{"reservation":"`+got.Reservation+`","cancel":true}`, &c); code != http.StatusOK ||
		len(c.Limits) != 2 || c.Limits[0].Name != "tpm" || c.Limits[1].Name != "monthly" || c.Limits[1].Refunded != 40 {
		t.Fatalf("cancel: %d %+v, want tpm and monthly each given 40 back", code, c)
	}
	for _, name := range []string{"tpm", "monthly"} {
		if u := partUsage(t, m, "user:alice", "chat", name, org("acme")); u.Used != 0 || u.OpenReservations != 0 {
			t.Errorf("%s after the cancel: used %d, open %d; want nothing", name, u.Used, u.OpenReservations)
		}
	}
	if u := partUsage(t, m, "user:alice", "chat", "rpm", org("acme")); u.Used != 1 {
		t.Errorf("rpm after the cancel: used %d, want the request's 1", u.Used)
	}
	for _, body := range []string{
		`{"key":"user:alice","endpoint":"GET /search","reserve":true}`,
		`{"key":"user:alice","endpoint":"POST /v1/chat","reserve":true,"dry_run":true}`,
	} {
		var bad RejectedBody
		if code := post(t, check, CheckPath, body, &bad); code != http.StatusBadRequest || !strings.Contains(bad.Message, "reserve") {
			t.Errorf("%s: %d %+v, want 400 about reserve", body, code, bad)
		}
	}
	if u := partUsage(t, m, "user:alice", "search", "per-client", nil); u.Used != 0 {
		t.Errorf("search after the refused reserve: used %d, want nothing taken", u.Used)
	}
}

// setToken is the parts of a token of several limits, for the tests to alter.
type setToken struct {
	endpoint, tier, client, id string
	estimate, expires          int64
	parts                      [][]string
}

func readSetToken(t *testing.T, tok string) setToken {
	t.Helper()
	raw, ok := strings.CutPrefix(tok, "r2.")
	if !ok {
		t.Fatalf("token %q: not of several limits", tok)
	}
	b, err := base64.RawURLEncoding.DecodeString(raw)
	if err != nil {
		t.Fatal(err)
	}
	var f []json.RawMessage
	if err := json.Unmarshal(b, &f); err != nil || len(f) != 7 {
		t.Fatalf("token %s: %v", b, err)
	}
	var s setToken
	for i, v := range []any{&s.endpoint, &s.tier, &s.client, &s.id, &s.estimate, &s.expires, &s.parts} {
		if err := json.Unmarshal(f[i], v); err != nil {
			t.Fatalf("token %s field %d: %v", b, i, err)
		}
	}
	return s
}

func (s setToken) String() string {
	b, _ := json.Marshal([]any{s.endpoint, s.tier, s.client, s.id, s.estimate, s.expires, s.parts})
	return "r2." + base64.RawURLEncoding.EncodeToString(b)
}

// A token of several limits is a handle, as one limit's is: altered to name another client,
// another limit's key or a key no limit of its name counts on, another endpoint, another id, or
// mangled, it is refused (4xx) and settles nothing; the genuine one settles after them all.
func TestAnAlteredTokenOfSeveralLimitsSettlesNothing(t *testing.T) {
	for name, store := range llmStores(t) {
		t.Run(name, func(t *testing.T) {
			m := llmMiddleware(t, store, &costEvents{})
			commit := m.CommitHandler()
			var got CheckResponse
			if code := post(t, m.CheckHandler(), CheckPath, `{"key":"user:alice","endpoint":"POST /v1/chat","reserve":true,"lease":true,"headers":{"X-Org-ID":"acme"}}`, &got); code != http.StatusOK {
				t.Fatalf("reserving check: %d %+v", code, got)
			}
			tok := readSetToken(t, got.Reservation)
			if len(tok.parts) != 3 {
				t.Fatalf("token parts %v, want tpm, daily and monthly", tok.parts)
			}
			alter := func(f func(*setToken)) string {
				c := tok
				c.parts = nil
				for _, p := range tok.parts {
					c.parts = append(c.parts, append([]string(nil), p...))
				}
				f(&c)
				return c.String()
			}
			// Moved to bob with the keys of his own limits; acme's month, which alice and bob
			// share, left out: its part, kept, would still name alice's reservation there.
			bob := alter(func(s *setToken) {
				s.client = "user:bob"
				s.parts = s.parts[:2]
				for _, p := range s.parts {
					p[1] = strings.Replace(p[1], "user:alice", "user:bob", 1)
				}
			})
			for _, c := range []struct {
				name  string
				token string
				code  int
			}{
				{"moved to bob", bob, http.StatusConflict},
				{"another id", alter(func(s *setToken) { s.id = strings.Repeat("0", 32) }), http.StatusConflict},
				{"another client, the keys alice's", alter(func(s *setToken) { s.client = "user:bob" }), http.StatusBadRequest},
				{"tpm's key under daily's name", alter(func(s *setToken) { s.parts[1][1] = s.parts[0][1] }), http.StatusBadRequest},
				{"a key of another class", alter(func(s *setToken) { s.parts[0][1] = "default|default|*|user:alice|tpm" }), http.StatusBadRequest},
				{"one limit twice", alter(func(s *setToken) { s.parts = append(s.parts, s.parts[0]) }), http.StatusBadRequest},
				{"a limit the tier lacks", alter(func(s *setToken) { s.parts[0][0] = "hourly" }), http.StatusNotFound},
				{"another endpoint", alter(func(s *setToken) { s.endpoint = "POST /v1/other" }), http.StatusNotFound},
				{"no limit", alter(func(s *setToken) { s.parts = [][]string{} }), http.StatusBadRequest},
				{"mangled", "r2." + strings.Repeat("A", 40), http.StatusBadRequest},
			} {
				var body RejectedBody
				if code := post(t, commit, CommitPath, `{"reservation":"`+c.token+`","cost":0}`, &body); code != c.code {
					t.Errorf("%s: %d %+v, want %d", c.name, code, body, c.code)
				}
			}
			u, open := used(t, m, "alice")
			if !equalCounts(u, map[string]int64{"rpm": 1, "tpm": 50, "daily": 50, "monthly": 50}) ||
				!equalCounts(open, map[string]int64{"rpm": 0, "tpm": 1, "daily": 1, "monthly": 1}) {
				t.Fatalf("after the altered tokens: used %v, open %v; want alice's estimate still held", u, open)
			}
			var c setCommitAnswer
			if code := post(t, commit, CommitPath, `{"reservation":"`+got.Reservation+`","cost":5}`, &c); code != http.StatusOK || len(c.Limits) != 3 {
				t.Fatalf("the genuine token: %d %+v", code, c)
			}
			usedNow(t, m, "alice", "the genuine token", map[string]int64{"rpm": 1, "tpm": 5, "daily": 5, "monthly": 5})
		})
	}
}

// Forward-auth on a tier of several limits whose class reads its cost holds the estimate on
// each limit of cost and answers one reservation token beside the lease; the gateway's
// bodiless commit settles each limit to the upstream's cost, or to the estimate when it has
// none.
func TestForwardAuthOfSeveralLimitsAnswersATokenThatAHeaderCommitSettles(t *testing.T) {
	for name, store := range llmStores(t) {
		t.Run(name, func(t *testing.T) {
			ev := &costEvents{}
			m := llmMiddleware(t, store, ev)
			authorize := func() (string, string) {
				t.Helper()
				r := httptest.NewRequest(http.MethodGet, AuthPath, nil)
				r.RemoteAddr = gatewayPeer
				for k, v := range map[string]string{"X-Original-URI": "/v1/chat", "X-Original-Method": "POST", "X-User-ID": "alice", "X-Org-ID": "acme"} {
					r.Header.Set(k, v)
				}
				w := httptest.NewRecorder()
				m.AuthHandler().ServeHTTP(w, r)
				if w.Code != http.StatusOK || w.Header().Get(ReservationHeader) == "" || w.Header().Get(LeaseHeader) == "" {
					t.Fatalf("auth: %d, reservation %q, lease %q; want 200 with both tokens",
						w.Code, w.Header().Get(ReservationHeader), w.Header().Get(LeaseHeader))
				}
				return w.Header().Get(ReservationHeader), w.Header().Get(LeaseHeader)
			}
			release := func(lease string) {
				t.Helper()
				r := httptest.NewRequest(http.MethodPost, ReleasePath, nil)
				r.Header.Set(LeaseHeader, lease)
				w := httptest.NewRecorder()
				m.ReleaseHandler().ServeHTTP(w, r)
				if w.Code != http.StatusOK {
					t.Fatalf("release: %d %s", w.Code, w.Body)
				}
			}
			tok, lease := authorize()
			u, open := used(t, m, "alice")
			if !equalCounts(u, map[string]int64{"rpm": 1, "tpm": 50, "daily": 50, "monthly": 50}) ||
				!equalCounts(open, map[string]int64{"rpm": 0, "tpm": 1, "daily": 1, "monthly": 1}) {
				t.Fatalf("after forward-auth: used %v, open %v; want the estimate of 50 held open on each limit of cost", u, open)
			}
			code, got := settleSet(t, m.CommitHandler(), map[string]string{ReservationHeader: tok, CostHeader: "30"})
			if code != http.StatusOK || got.Estimate != 50 || got.Actual != 30 || len(got.Limits) != 3 {
				t.Fatalf("header commit at 30: %d %+v; want 200, estimate 50, actual 30, three limits", code, got)
			}
			release(lease)
			usedNow(t, m, "alice", "settled at 30", map[string]int64{"rpm": 1, "tpm": 30, "daily": 30, "monthly": 30})

			tok, lease = authorize()
			code, got = settleSet(t, m.CommitHandler(), map[string]string{ReservationHeader: tok})
			if code != http.StatusOK || got.Actual != 50 {
				t.Fatalf("header commit without a cost: %d %+v; want settled at the estimate 50", code, got)
			}
			release(lease)
			usedNow(t, m, "alice", "settled at the estimate", map[string]int64{"rpm": 2, "tpm": 80, "daily": 80, "monthly": 80})
			ev.mu.Lock()
			defer ev.mu.Unlock()
			if ev.unknown[CostMissing] != 1 || len(ev.settled) != 2 {
				t.Errorf("cost events: unknown %v, settled %+v; want one missing cost, two requests settled", ev.unknown, ev.settled)
			}
		})
	}
}

// The token of one limit keeps its format, and its commit answers no per-limit list.
func TestTheTokenOfOneLimitIsUnchanged(t *testing.T) {
	m, _ := costMiddleware(t, newClock(), "POST /v1/chat", CostFrom{JSON: "usage.total_tokens"}, 200)
	var got CheckResponse
	if code := post(t, m.CheckHandler(), CheckPath, `{"key":"user:7","endpoint":"POST /v1/chat","reserve":true}`, &got); code != http.StatusOK ||
		!strings.HasPrefix(got.Reservation, "r1.") {
		t.Fatalf("reserving check: %d %+v, want an r1. token", code, got)
	}
	var c map[string]any
	if code := post(t, m.CommitHandler(), CommitPath, `{"reservation":"`+got.Reservation+`","cost":120}`, &c); code != http.StatusOK || c["limits"] != nil {
		t.Fatalf("commit: %d %v, want 200 without limits", code, c)
	}
}

// settleSet is settle, read as a commit of several limits.
func settleSet(t *testing.T, h http.Handler, hdr map[string]string) (int, setCommitAnswer) {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, CommitPath, nil)
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	var out setCommitAnswer
	decodeJSON(t, w.Body.Bytes(), &out)
	return w.Code, out
}

// A token of one limit committed after a reload turned its tier into several limits is a 404 that
// says so, not one about a concurrency limit the tier does not have.
func TestATokenOfOneLimitOnATierNowOfSeveralSaysSo(t *testing.T) {
	store := limiter.NewMemoryStore(limiter.MemoryConfig{})
	policy := func(c Class) *Policy {
		p, err := NewPolicy(PolicyConfig{Store: store, DefaultClass: "default", Classes: []Class{c,
			{Name: "default", Limits: map[string]limiter.Limit{"default": limiter.PerMinute(limiter.FixedWindow, 100)}}},
			Identity: IdentityConfig{TrustedHeaderPeers: testGateway}})
		if err != nil {
			t.Fatalf("NewPolicy: %v", err)
		}
		return p
	}
	one := Class{Name: "llm", Routes: []string{"POST /v1/chat"}, CostFrom: CostFrom{Header: "X-Tokens"}, Estimate: Estimate{Default: 50},
		Limits: map[string]limiter.Limit{"default": limiter.PerMinute(limiter.FixedWindow, 1000)}}
	m, err := New(Config{Policy: policy(one)})
	if err != nil {
		t.Fatal(err)
	}
	var got CheckResponse
	if code := post(t, m.CheckHandler(), CheckPath, `{"key":"user:alice","endpoint":"POST /v1/chat","reserve":true}`, &got); code != http.StatusOK || !strings.HasPrefix(got.Reservation, "r1.") {
		t.Fatalf("reserving check: %d %+v, want 200 with a token of one limit", code, got)
	}
	several := one
	several.Limits, several.TierLimits = nil, map[string][]TierLimit{"default": llmTier()}
	m.Swap(policy(several))
	var bad RejectedBody
	if code := post(t, m.CommitHandler(), CommitPath, `{"reservation":"`+got.Reservation+`","cost":10}`, &bad); code != http.StatusNotFound ||
		!strings.Contains(bad.Message, "several limits") || strings.Contains(bad.Message, "concurrency") {
		t.Errorf("commit after the reload: %d %+v, want 404 saying the tier has several limits now", code, bad)
	}
}
