package httplimit

import (
	"context"
	"encoding/base64"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// sdkKeyPolicy is a gateway in front of both OpenAI- and Anthropic-style APIs: the key is in
// Authorization or X-Api-Key, the first present; sk-pro and sk-ant-pro are pro keys.
func sdkKeyPolicy(refuse bool) PolicyConfig {
	return PolicyConfig{
		Store: limiter.NewMemoryStore(limiter.MemoryConfig{}),
		Tiers: []string{"free", "pro"}, DefaultTier: "free",
		Classes: []Class{{Name: "default", Limits: map[string]limiter.Limit{
			"free": limiter.PerMinute(limiter.FixedWindow, 2),
			"pro":  limiter.PerMinute(limiter.FixedWindow, 100),
		}}},
		Identity: IdentityConfig{
			APIKeyHeaders: []string{"Authorization", "X-Api-Key"}, APIKeySchemes: []string{"Bearer", "Basic"},
			RefuseUnusableAPIKey: refuse,
			TierByAPIKey:         map[string]string{"sk-pro": "pro", "sk-ant-pro": "pro"},
		},
	}
}

// The headers the official SDKs send with a chat or message request (openai-node and
// anthropic-sdk-typescript: key header, version header, the X-Stainless-* set, content type).
var (
	openAISDKHeaders = map[string]string{
		"Authorization": "Bearer sk-pro", "Content-Type": "application/json", "Accept": "application/json",
		"User-Agent": "OpenAI/JS 4.104.0", "X-Stainless-Lang": "js", "X-Stainless-Package-Version": "4.104.0",
		"X-Stainless-Os": "Linux", "X-Stainless-Arch": "x64", "X-Stainless-Runtime": "node",
		"X-Stainless-Runtime-Version": "v22.11.0", "X-Stainless-Retry-Count": "0",
	}
	anthropicSDKHeaders = map[string]string{
		"x-api-key": "sk-ant-pro", "anthropic-version": "2023-06-01", "content-type": "application/json",
		"accept": "application/json", "User-Agent": "Anthropic/JS 0.39.0", "X-Stainless-Lang": "js",
		"X-Stainless-Package-Version": "0.39.0", "X-Stainless-Retry-Count": "0",
	}
)

func TestTheKeysTheOpenAIAndAnthropicSDKsSendAreCountedOnTheirTier(t *testing.T) {
	basic := func(user, pass string) string {
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
	}
	for name, tc := range map[string]struct {
		headers map[string]string
		key     string // the raw key the request is charged to
	}{
		"the OpenAI SDK's Authorization: Bearer":        {openAISDKHeaders, "sk-pro"},
		"the Anthropic SDK's x-api-key":                 {anthropicSDKHeaders, "sk-ant-pro"},
		"bearer in lower case":                          {map[string]string{"Authorization": "bearer sk-pro"}, "sk-pro"},
		"BEARER and spaces around the token":            {map[string]string{"Authorization": "BEARER   sk-pro  "}, "sk-pro"},
		"Basic with the key as the user, as curl -u":    {map[string]string{"Authorization": basic("sk-pro", "")}, "sk-pro"},
		"Basic with the key as the password":            {map[string]string{"Authorization": basic("", "sk-pro")}, "sk-pro"},
		"the first header present, Authorization, wins": {map[string]string{"Authorization": "Bearer sk-pro", "X-Api-Key": "sk-other"}, "sk-pro"},
	} {
		t.Run(name, func(t *testing.T) {
			_, h, rec := setup(t, sdkKeyPolicy(false), newClock())
			w := do(h, "POST", "/v1/chat/completions", "203.0.113.7:1", tc.headers)
			r := rec.all()[0]
			if w.Code != 200 || clientOf(r.Key) != APIKeyKey(tc.key) || r.PlanTier != "pro" {
				t.Fatalf("status %d, keyed by %q on %q; want 200, %s on pro", w.Code, clientOf(r.Key), r.PlanTier, APIKeyKey(tc.key))
			}
		})
	}
}

// fallbacks counts the identity fallbacks a Middleware records.
type fallbacks struct {
	records
	mu      sync.Mutex
	reasons map[string]int
}

func (f *fallbacks) RecordIdentityFallback(_ context.Context, reason string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.reasons == nil {
		f.reasons = map[string]int{}
	}
	f.reasons[reason]++
}

// A key header present but unusable is never silent: keyed by address and counted with its
// reason (logged once per interval), or, with RefuseUnusableAPIKey, refused with 401.
func TestAnUnusableAPIKeyIsKeyedByAddressAndCountedOrRefused(t *testing.T) {
	cases := map[string]struct {
		headers map[string]string
		reason  string
	}{
		"an unknown scheme":           {map[string]string{"Authorization": "Token sk-pro"}, FallbackUnknownScheme},
		"an unknown key as Bearer":    {map[string]string{"Authorization": "Bearer sk-invented"}, FallbackUnknownKey},
		"an unknown key in X-Api-Key": {map[string]string{"X-Api-Key": "sk-invented"}, FallbackUnknownKey},
		"Bearer and no token":         {map[string]string{"Authorization": "Bearer "}, FallbackMalformedKey},
		"Basic that is not base64":    {map[string]string{"Authorization": "Basic %%%"}, FallbackMalformedKey},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var logs strings.Builder
			rec := &fallbacks{}
			p, err := NewPolicy(sdkKeyPolicy(false))
			if err != nil {
				t.Fatal(err)
			}
			m, err := New(Config{Policy: p, Recorder: rec, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
			for range 3 {
				do(h, "GET", "/", "203.0.113.7:1", tc.headers)
			}
			if got := clientOf(rec.all()[0].Key); got != "ip:203.0.113.7" || rec.all()[0].PlanTier != "free" {
				t.Errorf("keyed by %q on %q, want the address on free", got, rec.all()[0].PlanTier)
			}
			if rec.reasons[tc.reason] != 3 || len(rec.reasons) != 1 {
				t.Errorf("fallbacks counted %v, want %s three times", rec.reasons, tc.reason)
			}
			if n := strings.Count(logs.String(), "request credentials identify no client"); n != 1 || !strings.Contains(logs.String(), "reason="+tc.reason) {
				t.Errorf("%d log lines for three fallbacks, want 1 naming the reason:\n%s", n, logs.String())
			}
			if strings.Contains(logs.String(), "sk-") {
				t.Errorf("the log shows the key:\n%s", logs.String())
			}

			_, h, refused := setup(t, sdkKeyPolicy(true), newClock())
			w := do(h, "GET", "/", "203.0.113.7:1", tc.headers)
			if w.Code != http.StatusUnauthorized || !strings.Contains(w.Body.String(), `"invalid_api_key"`) || len(refused.all()) != 0 {
				t.Errorf("refusing: %d %s, %d decisions; want 401 invalid_api_key, none decided", w.Code, w.Body, len(refused.all()))
			}
		})
	}
	// No key header at all is no fallback: the address is the identity asked for.
	rec := &fallbacks{}
	p, err := NewPolicy(sdkKeyPolicy(true))
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(Config{Policy: p, Recorder: rec})
	if err != nil {
		t.Fatal(err)
	}
	if w := do(m.Handler(http.NotFoundHandler()), "GET", "/", "203.0.113.7:1", nil); w.Code != 404 || len(rec.reasons) != 0 {
		t.Errorf("no key: %d, fallbacks %v; want the request passed, nothing counted", w.Code, rec.reasons)
	}
}

// Forward-auth reads the key as the proxy does: the OpenAI SDK's Bearer key, forwarded by the
// gateway, is decided on pro; an unusable one refused with 401, which every gateway passes on.
func TestForwardAuthReadsTheKeysTheSDKsSend(t *testing.T) {
	m, _, rec := setup(t, sdkKeyPolicy(true), newClock())
	hdr := map[string]string{"X-Original-URI": "/v1/chat/completions", "X-Original-Method": "POST"}
	for k, v := range openAISDKHeaders {
		hdr[k] = v
	}
	if w := auth(m.AuthHandler(), "GET", AuthPath, hdr); w.Code != 200 || rec.all()[0].PlanTier != "pro" || clientOf(rec.all()[0].Key) != APIKeyKey("sk-pro") {
		t.Fatalf("the OpenAI SDK's headers: %d, decided on %q as %q; want 200 on pro", w.Code, rec.all()[0].PlanTier, clientOf(rec.all()[0].Key))
	}
	hdr["Authorization"] = "Bearer sk-invented"
	if w := auth(m.AuthHandler(), "GET", AuthPath, hdr); w.Code != http.StatusUnauthorized || len(rec.all()) != 1 {
		t.Fatalf("an unknown key: %d, %d decisions; want 401, none decided", w.Code, len(rec.all()))
	}
}
