package server_test

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/httplimit"
	"github.com/rl-exporter/rl-exporter/limiter"
)

// decisionAPI posts JSON (or, with headers, nothing) to serve's decision API paths.
type decisionAPI struct {
	t    *testing.T
	base string
}

func (d decisionAPI) post(path, body string, headers ...string) (int, map[string]any) {
	d.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, d.base+path, strings.NewReader(body))
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		d.t.Fatalf("%s: %v", path, err)
	}
	return resp.StatusCode, out
}

// reserve opens a reservation through a reserving check and returns its token.
func (d decisionAPI) reserve(key string) string {
	d.t.Helper()
	code, got := d.post(httplimit.CheckPath, `{"key":"`+key+`","endpoint":"POST /v1/chat","reserve":true}`)
	tok, _ := got["reservation"].(string)
	if code != 200 || tok == "" {
		d.t.Fatalf("reserving check: %d %v", code, got)
	}
	return tok
}

// editToken rewrites a reservation token's fields as a client in the middle could: client,
// estimate and expiry are the token's word, not the store's.
func editToken(t *testing.T, tok, client string, estimate, expires int64) string {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(tok, "r1."))
	if err != nil {
		t.Fatal(err)
	}
	var f []any
	if err := json.Unmarshal(raw, &f); err != nil || len(f) != 6 {
		t.Fatalf("token %s: %v", raw, err)
	}
	f[2], f[4], f[5] = client, estimate, expires
	b, _ := json.Marshal(f)
	return "r1." + base64.RawURLEncoding.EncodeToString(b)
}

// An edited token committed three times is refused each time and moves no cost metric: the
// expired phase and the open reservations are counted from what the store answered, never from
// the token; and a cost of 10^18 on the real token counts one quota at most.
func TestAnEditedTokenCommittedThriceMovesNoCostMetric(t *testing.T) {
	p := startCostProxy(t, usageUpstream(t).URL, limiter.NewMemoryStore(limiter.MemoryConfig{}),
		costClass("chat", httplimit.CostFrom{JSON: "usage.total_tokens"}, 300, limiter.PerMinute(limiter.FixedWindow, 1000), "POST /v1/chat"))
	api := decisionAPI{t, p.base}
	tok := api.reserve("apikey:team-a")
	forged := editToken(t, tok, "apikey:team-b", 1_000_000_000_000_000_000, 1)
	for i := range 3 {
		if code, got := api.post(httplimit.CommitPath, `{"reservation":"`+forged+`","cost":5}`); code != http.StatusConflict {
			t.Fatalf("commit %d of the edited token: %d %v, want 409", i+1, code, got)
		}
		// The header form, as nginx's post_action sends it, with no cost: the token's estimate.
		if code, got := api.post(httplimit.CommitPath, "", httplimit.ReservationHeader, forged); code != http.StatusConflict {
			t.Fatalf("header commit %d of the edited token: %d %v, want 409", i+1, code, got)
		}
	}
	s := parseSamples(t, scrape(t, p.metrics, nil))
	phase := func(ph string) string {
		return series("rate_limit_cost_total", "endpoint", "POST /v1/chat", "phase", ph, "plan_tier", "default")
	}
	open := series("rate_limit_reservations_open", "endpoint", "POST /v1/chat", "plan_tier", "default")
	if v := s.get(t, phase("expired")); v != 0 {
		t.Errorf("rate_limit_cost_total{phase=expired} = %g after 6 refused commits of an edited token, want 0", v)
	}
	if v := s.get(t, open); v != 1 {
		t.Errorf("rate_limit_reservations_open = %g, want the one real reservation", v)
	}
	if v := s[series("rate_limit_cost_unknown_total", "endpoint", "POST /v1/chat", "plan_tier", "default", "reason", "missing")]; v != 0 {
		t.Errorf("rate_limit_cost_unknown_total{reason=missing} = %g for commits the store refused, want 0", v)
	}
	if code, got := api.post(httplimit.CommitPath, `{"reservation":"`+tok+`","cost":1000000000000000000}`); code != 200 {
		t.Fatalf("commit of the real token at 10^18: %d %v", code, got)
	}
	s = parseSamples(t, scrape(t, p.metrics, nil))
	if v := s.get(t, phase("committed")); v != 1000 {
		t.Errorf("rate_limit_cost_total{phase=committed} = %g after a commit of 10^18, want the quota, 1000", v)
	}
	if v := s.get(t, open); v != 0 {
		t.Errorf("rate_limit_reservations_open = %g after the commit, want 0", v)
	}
}

// A commit after the hold ended is settled late: the cost beyond what the expiry took (refund:
// nothing) is charged to the current window, answered "late" and counted in phase "late".
func TestACommitAfterItsHoldIsChargedLate(t *testing.T) {
	const hold = 300 * time.Millisecond
	cl := costClass("chat", httplimit.CostFrom{JSON: "usage.total_tokens"}, 300, limiter.PerMinute(limiter.FixedWindow, 1000), "POST /v1/chat")
	cl.Hold, cl.OnExpiry = hold, limiter.ExpireRefund
	// The store's clock is the test's: the commit comes past the hold, and within the time the
	// store keeps an expired reservation's record, however slowly the machine runs.
	var at atomic.Int64
	at.Store(time.Now().UnixNano())
	store := limiter.NewMemoryStore(limiter.MemoryConfig{Now: func() time.Time { return time.Unix(0, at.Load()) }})
	p := startCostProxy(t, usageUpstream(t).URL, store, cl)
	api := decisionAPI{t, p.base}
	tok := api.reserve("apikey:team-a")
	at.Add(int64(hold + 100*time.Millisecond))
	code, got := api.post(httplimit.CommitPath, `{"reservation":"`+tok+`","cost":420}`)
	if code != 200 || got["late"] != true || got["charged"] != float64(420) || got["estimate"] != float64(300) {
		t.Fatalf("commit after the hold: %d %v, want 200, late, 420 charged", code, got)
	}
	if code, got = api.post(httplimit.CommitPath, `{"reservation":"`+tok+`","cost":420}`); code != http.StatusConflict {
		t.Fatalf("second commit: %d %v, want 409", code, got)
	}
	if code, got = api.post(httplimit.CheckPath, `{"key":"apikey:team-a","endpoint":"POST /v1/chat","dry_run":true}`); got["remaining"] != float64(580) {
		t.Fatalf("after the late commit: %d %v, want 1000 − 420 remaining", code, got)
	}
	s := parseSamples(t, scrape(t, p.metrics, nil))
	for ph, want := range map[string]float64{"reserved": 300, "expired": 300, "late": 420, "committed": 0} {
		if v := s.get(t, series("rate_limit_cost_total", "endpoint", "POST /v1/chat", "phase", ph, "plan_tier", "default")); v != want {
			t.Errorf("rate_limit_cost_total{phase=%q} = %g, want %g", ph, v, want)
		}
	}
	if v := s.get(t, series("rate_limit_reservations_open", "endpoint", "POST /v1/chat", "plan_tier", "default")); v != 0 {
		t.Errorf("rate_limit_reservations_open = %g, want 0", v)
	}
}

// A decision API caller keeps its reservation and its lease past hold and lease_ttl by renewing
// them (JSON, or the header form a gateway sends), then settles them as if they were fresh.
func TestRenewKeepsADecisionAPIReservationAndLeaseOpen(t *testing.T) {
	const ttl = 300 * time.Millisecond
	chat := costClass("chat", httplimit.CostFrom{JSON: "usage.total_tokens"}, 300, limiter.PerMinute(limiter.FixedWindow, 1000), "POST /v1/chat")
	chat.Hold = ttl
	slow := httplimit.Class{Name: "slow", Routes: []string{"POST /v1/slow"}, Leases: map[string]limiter.LeaseLimit{"default": {Limit: 1, TTL: ttl}}}
	p := startCostProxy(t, usageUpstream(t).URL, limiter.NewMemoryStore(limiter.MemoryConfig{}), chat, slow)
	api := decisionAPI{t, p.base}
	tok := api.reserve("apikey:team-a")
	code, got := api.post(httplimit.CheckPath, `{"key":"apikey:team-a","endpoint":"POST /v1/slow","lease":true}`)
	lease, _ := got["lease"].(string)
	if code != 200 || lease == "" {
		t.Fatalf("lease check: %d %v", code, got)
	}
	tick := time.NewTicker(ttl / 3)
	defer tick.Stop()
	for end := time.Now().Add(4 * ttl); time.Now().Before(end); <-tick.C {
		if code, got := api.post(httplimit.RenewPath, `{"reservation":"`+tok+`"}`); code != 200 || got["renewed"] != true {
			t.Fatalf("renew the reservation: %d %v", code, got)
		}
		if code, got := api.post(httplimit.RenewPath, "", httplimit.LeaseHeader, lease); code != 200 || got["renewed"] != true {
			t.Fatalf("renew the lease by header: %d %v", code, got)
		}
	}
	if code, got := api.post(httplimit.CheckPath, `{"key":"apikey:team-a","endpoint":"POST /v1/slow","lease":true}`); code != http.StatusTooManyRequests {
		t.Fatalf("a second lease while the renewed one is held (limit 1): %d %v, want 429", code, got)
	}
	if code, got := api.post(httplimit.CommitPath, `{"reservation":"`+tok+`","cost":120}`); code != 200 || got["late"] != nil || got["refunded"] != float64(180) {
		t.Fatalf("commit after %s of renewals on a hold of %s: %d %v, want settled on time", 4*ttl, ttl, code, got)
	}
	if code, got := api.post(httplimit.ReleasePath, `{"lease":"`+lease+`"}`); code != 200 {
		t.Fatalf("release after renewals: %d %v, want 200", code, got)
	}
	for _, c := range []struct {
		body string
		code int
	}{
		{`{"reservation":"` + tok + `"}`, http.StatusConflict},
		{`{"lease":"` + lease + `"}`, http.StatusNotFound},
		{`{}`, http.StatusBadRequest},
		{`{"reservation":"` + tok + `","lease":"` + lease + `"}`, http.StatusBadRequest},
		{`{"reservation":"r1.!!"}`, http.StatusBadRequest},
	} {
		if code, got := api.post(httplimit.RenewPath, c.body); code != c.code {
			t.Errorf("renew %s: %d %v, want %d", c.body, code, got, c.code)
		}
	}
}
