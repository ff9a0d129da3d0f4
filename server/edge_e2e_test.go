package server_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

const checkToken = "orders-svc-0123456789abcdef"

// With server.check_api.tokens, an allowed peer must also present one of
// them: without it the answer is 401 with the API's JSON error body and
// nothing is decided.
func TestWithCheckAPITokensTheDecisionAPIWantsOne(t *testing.T) {
	const body = `{"key":"user:alice","endpoint":"GET /a"}`
	p := startServeEnv(t, []string{"RL_SERVER__CHECK_API__TOKENS=orders:" + checkToken}, []string{"main"}, "--config", writeConfig(t, fivePerMinute))
	url := p.url("main", "/v1/check")
	for _, c := range []struct{ name, auth string }{{"no token", ""}, {"a wrong token", "Bearer wrong-0123456789abcdef"}, {"a token of another scheme", "Basic " + checkToken}} {
		hdr := map[string]string{}
		if c.auth != "" {
			hdr["Authorization"] = c.auth
		}
		code, h, got := postCheck(t, fromAddr("127.0.0.1"), url, body, hdr)
		var e struct{ Error, Message string }
		if code != http.StatusUnauthorized || json.Unmarshal([]byte(got), &e) != nil || e.Error != "unauthorized" {
			t.Errorf("%s: status %d body %s, want 401 with a JSON error unauthorized", c.name, code, got)
		}
		if !strings.HasPrefix(h.Get("WWW-Authenticate"), `Bearer realm="rl-exporter decision API"`) || h.Get("X-RateLimit-Remaining") != "" {
			t.Errorf("%s: WWW-Authenticate %q, X-RateLimit-Remaining %q: want a Bearer challenge and no decision", c.name, h.Get("WWW-Authenticate"), h.Get("X-RateLimit-Remaining"))
		}
	}
	code, h, got := postCheck(t, fromAddr("127.0.0.1"), url, body, map[string]string{"Authorization": "Bearer " + checkToken})
	if code != 200 || h.Get("X-RateLimit-Remaining") != "4" {
		t.Errorf("with the token: status %d, X-RateLimit-Remaining %q, body %s; want 200 and 4 (the refused calls took nothing)", code, h.Get("X-RateLimit-Remaining"), got)
	}
	if strings.Contains(p.log(), checkToken) {
		t.Errorf("the log shows the decision API's token:\n%s", p.log())
	}
}

// exposedLines returns the WARN lines of p that name key.
func exposedLines(p *proc, key string) []string {
	var out []string
	for _, l := range strings.Split(p.log(), "\n") {
		if strings.Contains(l, `"level":"WARN"`) && strings.Contains(l, `"key":"`+key+`"`) {
			out = append(out, l)
		}
	}
	return out
}

// A proxy trusted on this host (nginx terminating TLS) is inside the
// default allowed_peers: every client of the proxy may then claim any key
// and plan tier. serve says so at start, unless the API wants a token.
func TestServeWarnsWhenATrustedProxyMayCallTheDecisionAPI(t *testing.T) {
	cfg := writeConfig(t, fivePerMinute+"identity: {trusted_proxies: [127.0.0.1/32]}\n")
	p := startServe(t, []string{"main"}, "--config", cfg)
	if l := exposedLines(p, "server.check_api.allowed_peers"); len(l) != 1 || !strings.Contains(l[0], "trusted_proxies") {
		t.Errorf("want one WARN naming server.check_api.allowed_peers and the trusted proxy, got %q\n%s", l, p.log())
	}
	withTokens := startServeEnv(t, []string{"RL_SERVER__CHECK_API__TOKENS=orders:" + checkToken}, []string{"main"}, "--config", cfg)
	if l := exposedLines(withTokens, "server.check_api.allowed_peers"); len(l) != 0 {
		t.Errorf("with tokens the decision API is protected, yet: %q", l)
	}
	plain := startServe(t, []string{"main"}, "--config", writeConfig(t, fivePerMinute))
	if l := exposedLines(plain, "server.check_api.allowed_peers"); len(l) != 0 {
		t.Errorf("the default config (loopback, no proxy) warned: %q", l)
	}
}

// Without admin tokens the top-limited keys (client ids and addresses)
// are not served: 403 saying to configure tokens.
func TestWithoutAdminTokensTheTopLimitedKeysAreNotServed(t *testing.T) {
	cfg := writeConfig(t, "classes: {default: {limits: {default: {algorithm: fixed_window, rate: 1, period: 1h}}}}\n")
	p := startServe(t, []string{"main", "admin"}, "--config", cfg, "--admin-listen", "127.0.0.1:0")
	for range 3 {
		get(t, p.url("main", "/orders"), nil)
	}
	code, body, _ := adminCall(t, p, "GET", "/debug/top-limited", "", "")
	if code != http.StatusForbidden || strings.Contains(body, "127.0.0.1") || !strings.Contains(body, "admin.tokens_file") {
		t.Errorf("/debug/top-limited without admin tokens: %d %s, want 403 naming admin.tokens_file and no client", code, body)
	}
	if l := exposedLines(p, "server.admin_listen"); len(l) != 0 {
		t.Errorf("a loopback admin listener warned: %q", l)
	}
}

// An admin listener on every interface without admin tokens is warned of
// at start (check refuses it).
func TestServeWarnsOfAnAdminListenerBeyondThisHostWithoutTokens(t *testing.T) {
	p := startServe(t, []string{"main", "admin"}, "--admin-listen", ":0")
	if l := exposedLines(p, "server.admin_listen"); len(l) != 1 || !strings.Contains(l[0], "admin tokens") {
		t.Errorf("want one WARN naming server.admin_listen, got %q\n%s", l, p.log())
	}
}

// Refused admin tokens are counted on /metrics and logged once per
// interval, not once per request.
func TestRefusedAdminTokensAreCountedAndLoggedInSummary(t *testing.T) {
	p := startServeEnv(t, tokensEnv, []string{"main", "admin"}, "--admin-listen", "127.0.0.1:0")
	if got := metric(t, p, "rl_exporter_admin_auth_failures_total"); got != 0 {
		t.Fatalf("rl_exporter_admin_auth_failures_total %g before any request, want 0", got)
	}
	for i := range 20 {
		tok := "wrong-0123456789abcdef"
		if i%2 == 0 {
			tok = ""
		}
		if code, _, _ := adminCall(t, p, "GET", "/debug/top-limited", tok, ""); code != 401 {
			t.Fatalf("a refused token: %d, want 401", code)
		}
	}
	if code, _, _ := adminCall(t, p, "GET", "/debug/top-limited", grafanaToken, ""); code != 200 {
		t.Fatalf("a valid token: %d, want 200", code)
	}
	if got := metric(t, p, "rl_exporter_admin_auth_failures_total"); got != 20 {
		t.Errorf("rl_exporter_admin_auth_failures_total %g, want 20", got)
	}
	// 20 requests well within the 10s interval: the first is logged.
	if n := strings.Count(p.log(), "requests refused for their token"); n != 1 {
		t.Errorf("%d log lines for 20 refused requests within the interval, want 1:\n%s", n, p.log())
	}
	if !strings.Contains(p.log(), `"last_peer":"127.0.0.1:`) {
		t.Errorf("the summary line does not name the peer:\n%s", p.log())
	}
}
