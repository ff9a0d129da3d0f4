package server_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// checkResult is the part of a decision API answer these tests read.
type checkResult struct {
	Allowed    bool   `json:"allowed"`
	Status     string `json:"status"`
	Remaining  int64  `json:"remaining"`
	RetryAfter int64  `json:"retry_after"`
	DryRun     bool   `json:"dry_run"`
	Error      string `json:"error"`
	Message    string `json:"message"`
}

func postCheckJSON(t *testing.T, p *proc, body string) (int, http.Header, checkResult) {
	t.Helper()
	code, hdr, got := postCheck(t, http.DefaultClient, p.url("main", "/v1/check"), body, nil)
	var r checkResult
	if err := json.Unmarshal([]byte(got), &r); err != nil {
		t.Fatalf("POST /v1/check %s: body %q is not JSON: %v", body, got, err)
	}
	return code, hdr, r
}

// A dry run answers like a check, headers included, and takes nothing;
// an admin DELETE of a client's key gives every instance's budget back at
// once and is audited.
func TestADryRunTakesNothingAndAKeyResetGivesTheBudgetBackOnEveryInstance(t *testing.T) {
	a, b, _ := startLivePair(t)
	const dry = `{"key":"user:dora","endpoint":"GET /a","plan_tier":"free","dry_run":true}`
	const real = `{"key":"user:dora","endpoint":"GET /a","plan_tier":"free"}`

	for i := 0; i < 5; i++ {
		code, hdr, r := postCheckJSON(t, a, dry)
		if code != 200 || !r.Allowed || !r.DryRun || r.Remaining != 2 || hdr.Get("X-RateLimit-Remaining") != "2" {
			t.Fatalf("dry run %d on a fresh key: %d %+v, X-RateLimit-Remaining %q; want 200, allowed, dry_run, 2 remaining", i+1, code, r, hdr.Get("X-RateLimit-Remaining"))
		}
	}
	for i, want := range []int64{1, 0} {
		code, _, r := postCheckJSON(t, b, real)
		if code != 200 || r.Remaining != want || r.DryRun {
			t.Fatalf("check %d after the dry runs: %d %+v; want 200 with %d remaining: the dry runs took nothing", i+1, code, r, want)
		}
	}
	code, hdr, r := postCheckJSON(t, a, dry)
	if code != http.StatusTooManyRequests || r.Allowed || !r.DryRun || r.RetryAfter <= 0 || hdr.Get("Retry-After") == "" || r.Error != "rate_limit_exceeded" {
		t.Fatalf("dry run on a spent key: %d %+v, Retry-After %q; want 429 as a real check, marked dry_run", code, r, hdr.Get("Retry-After"))
	}
	// The cost is asked about as given.
	if code, _, r := postCheckJSON(t, a, `{"key":"user:cost","endpoint":"GET /a","plan_tier":"free","cost":2,"dry_run":true}`); code != 200 || !r.Allowed || r.Remaining != 2 {
		t.Fatalf("dry run of cost 2 on a fresh key of quota 2: %d %+v; want allowed with 2 remaining", code, r)
	}
	if code, _, r := postCheckJSON(t, a, `{"key":"user:cost","endpoint":"GET /a","plan_tier":"free","cost":3,"dry_run":true}`); code != 400 || !strings.Contains(r.Message, "cost") {
		t.Fatalf("dry run of a cost above the quota: %d %+v; want 400 naming the cost", code, r)
	}

	// Bad admin requests get a clear 4xx and change nothing.
	for _, c := range []struct {
		name, method, path, token string
		code                      int
		says                      string
	}{
		{"without a token", "DELETE", "/admin/v1/keys/user:dora", "", 401, "token"},
		{"with a read-only token", "DELETE", "/admin/v1/keys/user:dora", grafanaToken, 403, "read-only"},
		{"with GET", "GET", "/admin/v1/keys/user:dora", opsToken, 405, "DELETE"},
		{"without a key", "DELETE", "/admin/v1/keys/", opsToken, 400, "{key}"},
		{"with an unknown class", "DELETE", "/admin/v1/keys/user:dora?class=nope", opsToken, 400, "nope"},
		{"with an unknown parameter", "DELETE", "/admin/v1/keys/user:dora?tier=free", opsToken, 400, "tier"},
	} {
		code, body, _ := adminCall(t, a, c.method, c.path, c.token, "")
		if code != c.code || !strings.Contains(body, c.says) {
			t.Errorf("%s: %d %s; want %d with a message naming %q", c.name, code, body, c.code, c.says)
		}
	}
	if code, _, _ := postCheckJSON(t, b, real); code != http.StatusTooManyRequests {
		t.Fatalf("after refused admin calls the key is not spent any more: %d", code)
	}

	code, body, _ := adminCall(t, a, "DELETE", "/admin/v1/keys/user:dora", opsToken, "")
	if code != 200 {
		t.Fatalf("DELETE /admin/v1/keys/user:dora: %d %s", code, body)
	}
	var out struct {
		Key   string `json:"key"`
		Reset []struct {
			Class, Endpoint, Algorithm string
			PlanTier                   string `json:"plan_tier"`
		} `json:"reset"`
	}
	if err := json.Unmarshal([]byte(body), &out); err != nil {
		t.Fatalf("answer %s: %v", body, err)
	}
	got := map[string]bool{}
	for _, s := range out.Reset {
		got[s.Class+"/"+s.PlanTier+"/"+s.Endpoint+"/"+s.Algorithm] = true
	}
	for _, want := range []string{"api/free///fixed_window", "api/pro///fixed_window", "bulk/free//bulk//fixed_window"} {
		if !got[want] {
			t.Errorf("reset answer %s: does not list %s", body, want)
		}
	}
	if out.Key != "user:dora" {
		t.Errorf("reset answer names key %q, want user:dora", out.Key)
	}
	// Both instances see the budget back at once: it lives in the store.
	for i, p := range []*proc{b, a} {
		if code, _, r := postCheckJSON(t, p, real); code != 200 || r.Remaining != int64(1-i) {
			t.Fatalf("check %d after the reset: %d %+v; want allowed with %d remaining", i+1, code, r, 1-i)
		}
	}
	within(t, 2*time.Second, "the reset is audited", func() bool {
		l := a.log()
		return strings.Contains(l, "admin audit: rate-limit key reset") && strings.Contains(l, `"token":"ops"`) && strings.Contains(l, `"key":"user:dora"`)
	})

	// ?class narrows the reset to one class.
	code, body, _ = adminCall(t, a, "DELETE", "/admin/v1/keys/user:dora?class=bulk", opsToken, "")
	if code != 200 || strings.Contains(body, `"class": "api"`) || !strings.Contains(body, `"class": "bulk"`) {
		t.Fatalf("DELETE ...?class=bulk: %d %s; want only bulk's budgets", code, body)
	}
	if code, _, r := postCheckJSON(t, b, real); code != http.StatusTooManyRequests {
		t.Fatalf("api budget after a reset of class bulk: %d %+v; want it untouched (spent: 429)", code, r)
	}
}
