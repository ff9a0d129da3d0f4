package server_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/rl-exporter/rl-exporter/admin"
	"github.com/rl-exporter/rl-exporter/httplimit"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/server"
)

// Behind an OpenAI-style upstream, whose own API is /v1/…, CheckAPI.Prefix moves every path of
// the decision API out of its way: under the prefix they are answered, at /v1/ the upstream is.
func TestTheDecisionAPIPrefixLeavesTheUpstreamsV1PathsToIt(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "upstream "+r.URL.Path)
	}))
	t.Cleanup(up.Close)
	target, _ := url.Parse(up.URL)
	call := func(base, method, path, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("X-Original-URI", "/v1/models")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	moved := startServer(t, server.Config{Upstream: target, CheckAPI: server.CheckAPI{Prefix: "/ratelimit/"}})
	base := "http://" + moved.Addr("main")
	for _, p := range []string{"/v1/check", "/v1/commit", "/v1/usage", "/v1/auth", "/v1/release", "/v1/auth/v1/models"} {
		if code, body := call(base, "POST", p, `{}`); code != 200 || body != "upstream "+p {
			t.Errorf("POST %s with the prefix moved: %d %q, want the upstream's answer", p, code, body)
		}
	}
	for path, want := range map[string]string{
		"/ratelimit/check":          `"allowed":true`,
		"/ratelimit/usage?key=u":    `"key":"u"`,
		"/ratelimit/auth":           "",
		"/ratelimit/auth/v1/models": "",
		"/ratelimit/commit":         `"error"`,
		"/ratelimit/release":        `"error"`,
	} {
		method, body := "POST", `{"key":"u","endpoint":"/v1/models"}`
		if strings.Contains(path, "usage") {
			method, body = "GET", ""
		}
		code, got := call(base, method, path, body)
		if strings.HasPrefix(got, "upstream") || code == 404 || !strings.Contains(got, want) {
			t.Errorf("%s %s: %d %q, want rl-exporter's answer with %q", method, path, code, got, want)
		}
	}
	// The default prefix is /v1/, as it always was.
	def := startServer(t, server.Config{Upstream: target})
	if code, body := call("http://"+def.Addr("main"), "POST", "/v1/check", `{"key":"u","endpoint":"/v1/models"}`); code != 200 || !strings.Contains(body, `"allowed":true`) {
		t.Errorf("POST /v1/check by default: %d %q", code, body)
	}
}

// With the decision API's tokens, Authorization on /v1/auth is the gateway's token: never read
// as a client's API key, which comes in the other header listed.
func TestForwardAuthWithTokensReadsTheClientsKeyFromTheOtherHeader(t *testing.T) {
	p, err := httplimit.NewPolicy(httplimit.PolicyConfig{
		Store: limiter.NewMemoryStore(limiter.MemoryConfig{}),
		Tiers: []string{"free", "pro"}, DefaultTier: "free",
		Classes: []httplimit.Class{{Name: "default", Limits: map[string]limiter.Limit{
			"free": limiter.PerMinute(limiter.FixedWindow, 2), "pro": limiter.PerMinute(limiter.FixedWindow, 100)}}},
		Identity: httplimit.IdentityConfig{APIKeyHeaders: []string{"Authorization", "X-Api-Key"},
			RefuseUnusableAPIKey: true, TierByAPIKey: map[string]string{"sk-ant-pro": "pro"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	mw, err := httplimit.New(httplimit.Config{Policy: p})
	if err != nil {
		t.Fatal(err)
	}
	const token = "gateway-0123456789abcdef"
	srv := startServer(t, server.Config{Middleware: mw, CheckAPI: server.CheckAPI{Tokens: []admin.Token{{Name: "nginx", Secret: token}}}})
	req, _ := http.NewRequest("GET", "http://"+srv.Addr("main")+httplimit.AuthPath, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("X-Api-Key", "sk-ant-pro")
	req.Header.Set("X-Original-URI", "/v1/messages")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("X-RateLimit-Limit") != "100" {
		t.Fatalf("status %d, X-RateLimit-Limit %q: want 200 on pro's 100", resp.StatusCode, resp.Header.Get("X-RateLimit-Limit"))
	}
}
