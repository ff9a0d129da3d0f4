package server_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// getAuth sends one forward-auth request from c, as a gateway would.
func getAuth(t *testing.T, c *http.Client, url string, hdr map[string]string) (int, http.Header, string) {
	t.Helper()
	return sendFrom(t, c, "GET", url, "", hdr)
}

func TestForwardAuthIsServedToTheDecisionAPIsPeersAndNeverProxied(t *testing.T) {
	nginx := map[string]string{"X-Original-URI": "/a", "X-Original-Method": "GET"}
	t.Run("an allowed peer is decided on the original request, under /v1/auth and below it", func(t *testing.T) {
		up := upstream(t)
		p := startServe(t, []string{"main"}, "--config", writeConfig(t, fivePerMinute), "--upstream", up.URL)
		var remaining []string
		for _, path := range []string{"/v1/auth", "/v1/auth/a"} {
			code, hdr, body := getAuth(t, fromAddr("127.0.0.1"), p.url("main", path), nginx)
			if code != 200 || hdr.Get("X-Upstream") != "" || body != "" {
				t.Errorf("%s: status %d, X-Upstream %q, body %q; want 200 from serve itself, no body", path, code, hdr.Get("X-Upstream"), body)
			}
			remaining = append(remaining, hdr.Get("X-RateLimit-Remaining"))
		}
		if fmt.Sprint(remaining) != "[4 3]" {
			t.Errorf("X-RateLimit-Remaining %v, want [4 3]: both decided on the one client's budget", remaining)
		}
	})

	t.Run("another peer gets 403 and nothing is decided", func(t *testing.T) {
		cfg := fivePerMinute + "server: {check_api: {allowed_peers: [127.0.0.1/32]}}\n"
		p := startServe(t, []string{"main"}, "--config", writeConfig(t, cfg))
		for _, path := range []string{"/v1/auth", "/v1/auth/a"} {
			code, hdr, body := getAuth(t, fromAddr("127.0.0.2"), p.url("main", path), nginx)
			if code != http.StatusForbidden || !strings.Contains(body, "peer_not_allowed") || hdr.Get("RateLimit") != "" {
				t.Errorf("%s from 127.0.0.2: status %d, body %s; want 403 peer_not_allowed without a decision", path, code, body)
			}
		}
	})

	t.Run("with tokens the gateway must present one", func(t *testing.T) {
		p := startServeEnv(t, []string{"RL_SERVER__CHECK_API__TOKENS=gateway:" + checkToken}, []string{"main"}, "--config", writeConfig(t, fivePerMinute))
		if code, _, body := getAuth(t, fromAddr("127.0.0.1"), p.url("main", "/v1/auth"), nginx); code != http.StatusUnauthorized {
			t.Errorf("without the token: status %d %s, want 401", code, body)
		}
		with := map[string]string{"Authorization": "Bearer " + checkToken}
		for k, v := range nginx {
			with[k] = v
		}
		if code, hdr, body := getAuth(t, fromAddr("127.0.0.1"), p.url("main", "/v1/auth"), with); code != 200 || hdr.Get("X-RateLimit-Remaining") != "4" {
			t.Errorf("with the token: status %d %s, X-RateLimit-Remaining %q; want 200 and 4", code, body, hdr.Get("X-RateLimit-Remaining"))
		}
	})

	t.Run("with the decision API disabled the path is proxied like any other", func(t *testing.T) {
		up := upstream(t)
		cfg := fivePerMinute + "server: {check_api: {enabled: false}}\n"
		p := startServe(t, []string{"main"}, "--config", writeConfig(t, cfg), "--upstream", up.URL)
		code, hdr, body := getAuth(t, fromAddr("127.0.0.1"), p.url("main", "/v1/auth/a"), nginx)
		if code != 200 || hdr.Get("X-Upstream") != "yes" || body != "upstream saw GET /v1/auth/a\n" {
			t.Errorf("status %d, X-Upstream %q, body %q; want the upstream's answer", code, hdr.Get("X-Upstream"), body)
		}
	})
}
