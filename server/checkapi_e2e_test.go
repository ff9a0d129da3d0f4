package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// fromAddr is an HTTP client whose connections leave from the local
// address ip, so that serve sees ip as the direct peer.
func fromAddr(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}, Timeout: 10 * time.Second}
}

// postCheck sends one decision API request from c and returns the status,
// the headers and the body.
func postCheck(t *testing.T, c *http.Client, url, body string, hdr map[string]string) (int, http.Header, string) {
	t.Helper()
	return sendFrom(t, c, "POST", url, body, hdr)
}

// sendFrom sends one request from c and returns the status, the headers
// and the body.
func sendFrom(t *testing.T, c *http.Client, method, url, body string, hdr map[string]string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func TestTheDecisionAPIAnswersOnlyAllowedPeers(t *testing.T) {
	const body = `{"key":"user:alice","endpoint":"GET /a"}`
	t.Run("by default this host is allowed", func(t *testing.T) {
		p := startServe(t, []string{"main"}, "--config", writeConfig(t, fivePerMinute))
		code, hdr, got := postCheck(t, fromAddr("127.0.0.1"), p.url("main", "/v1/check"), body, nil)
		if code != 200 || hdr.Get("X-RateLimit-Remaining") != "4" || !strings.Contains(got, `"allowed":true`) {
			t.Errorf("from 127.0.0.1: status %d, X-RateLimit-Remaining %q, body %s; want 200, 4 and a decision", code, hdr.Get("X-RateLimit-Remaining"), got)
		}
	})

	t.Run("a peer outside the list gets 403 with the reason, and nothing is decided or counted", func(t *testing.T) {
		// 127.0.0.2 is this host too, but not in the list; it even claims,
		// through a proxy header serve believes, to be 127.0.0.1.
		cfg := fivePerMinute + `
server: {check_api: {allowed_peers: [127.0.0.1/32]}}
identity: {trusted_proxies: [127.0.0.0/8]}
`
		p := startServe(t, []string{"main"}, "--config", writeConfig(t, cfg))
		url := p.url("main", "/v1/check")
		for i := 0; i < 3; i++ {
			code, hdr, got := postCheck(t, fromAddr("127.0.0.2"), url, body, map[string]string{"X-Forwarded-For": "127.0.0.1", "Forwarded": "for=127.0.0.1"})
			if code != http.StatusForbidden {
				t.Fatalf("from 127.0.0.2: status %d, body %s; want 403", code, got)
			}
			var e struct{ Error, Message string }
			if err := json.Unmarshal([]byte(got), &e); err != nil {
				t.Fatalf("403 body %q is not JSON: %v", got, err)
			}
			if e.Error != "peer_not_allowed" || !strings.Contains(e.Message, "server.check_api.allowed_peers") || !strings.Contains(e.Message, "127.0.0.2") {
				t.Errorf("403 body %s: want error peer_not_allowed and a message naming server.check_api.allowed_peers and the peer 127.0.0.2", got)
			}
			if strings.Contains(got, "allowed\":") || hdr.Get("X-RateLimit-Remaining") != "" || hdr.Get("RateLimit") != "" {
				t.Errorf("403 carries a decision: body %s, headers %v", got, hdr)
			}
		}
		// The refused calls took nothing from alice's budget and were not
		// counted as decisions.
		code, hdr, got := postCheck(t, fromAddr("127.0.0.1"), url, body, nil)
		if code != 200 || hdr.Get("X-RateLimit-Remaining") != "4" {
			t.Errorf("from 127.0.0.1 after three refused calls: status %d, X-RateLimit-Remaining %q, body %s; want 200 and 4 (the first decision)", code, hdr.Get("X-RateLimit-Remaining"), got)
		}
		if n := parseSamples(t, scrape(t, p.url("main", "/metrics"), nil)).sum("rate_limit_requests_total{"); n != 1 {
			t.Errorf("rate_limit_requests_total adds up to %v, want 1: a refused peer is never counted", n)
		}
		if !strings.Contains(p.log(), "decision API refused a peer") {
			t.Errorf("no debug line for the refused peer in the log:\n%s", p.log())
		}
	})

	t.Run("disabled, the path is proxied to the upstream like any other and limited", func(t *testing.T) {
		up := upstream(t)
		cfg := fivePerMinute + "server: {check_api: {enabled: false}}\n"
		p := startServe(t, []string{"main"}, "--config", writeConfig(t, cfg), "--upstream", up.URL)
		code, hdr, got := postCheck(t, fromAddr("127.0.0.1"), p.url("main", "/v1/check"), body, nil)
		if code != 200 || hdr.Get("X-Upstream") != "yes" || got != "upstream saw POST /v1/check\n" {
			t.Errorf("status %d, X-Upstream %q, body %q; want the upstream's answer", code, hdr.Get("X-Upstream"), got)
		}
		if hdr.Get("X-RateLimit-Remaining") != "4" {
			t.Errorf("X-RateLimit-Remaining %q, want 4: the proxied path is limited like any other", hdr.Get("X-RateLimit-Remaining"))
		}
	})

	t.Run("disabled without an upstream, the path is not found and the 404 does not offer it", func(t *testing.T) {
		cfg := fivePerMinute + "server: {check_api: {enabled: false}}\n"
		p := startServe(t, []string{"main"}, "--config", writeConfig(t, cfg))
		code, _, got := postCheck(t, fromAddr("127.0.0.1"), p.url("main", "/v1/check"), body, nil)
		if code != 404 || strings.Contains(got, "/v1/check") {
			t.Errorf("status %d, body %s; want 404 without a mention of /v1/check", code, got)
		}
	})

	t.Run("an allowed peer list that does not parse stops serve, naming the entry", func(t *testing.T) {
		cfg := writeConfig(t, "server: {check_api: {allowed_peers: [127.0.0.1/32, 10.0.0.0/33]}}\n")
		out, err := exec.Command(binary, "serve", "--config", cfg).CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
			t.Fatalf("exit %v, want status 1; output %s", err, out)
		}
		for _, want := range []string{cfg, "server.check_api.allowed_peers[1]", `"10.0.0.0/33"`} {
			if !strings.Contains(string(out), want) {
				t.Errorf("output %q does not mention %s", out, want)
			}
		}
	})

	t.Run("the environment sets the list like any other", func(t *testing.T) {
		p := startServeEnv(t, []string{"RL_SERVER__CHECK_API__ALLOWED_PEERS=127.0.0.2,::1"}, []string{"main"}, "--config", writeConfig(t, fivePerMinute))
		url := p.url("main", "/v1/check")
		codes := []int{}
		for _, ip := range []string{"127.0.0.1", "127.0.0.2"} {
			code, _, _ := postCheck(t, fromAddr(ip), url, body, nil)
			codes = append(codes, code)
		}
		if fmt.Sprint(codes) != "[403 200]" {
			t.Errorf("statuses from 127.0.0.1 and 127.0.0.2: %v, want [403 200]", codes)
		}
	})
}
