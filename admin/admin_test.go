package admin

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/livelimits"
)

const (
	rwToken = "rw-0123456789abcdef"
	roToken = "ro-0123456789abcdef"
)

func newAPI(t *testing.T) (http.Handler, *livelimits.Cache, *strings.Builder) {
	t.Helper()
	cache, err := livelimits.New(livelimits.Config{Backend: &livelimits.Memory{}, Targets: []livelimits.Target{
		{Class: "public", Tier: "free", Limit: limiter.PerMinute(limiter.TokenBucket, 10), Cost: 1},
		{Class: "bulk", Tier: "free", Limit: limiter.PerMinute(limiter.FixedWindow, 50), Cost: 5},
	}})
	if err != nil {
		t.Fatal(err)
	}
	var audit strings.Builder
	api, err := New(Config{
		Tokens: []Token{{Name: "ops", ReadWrite: true, Secret: rwToken}, {Name: "grafana", Secret: roToken}},
		Cache:  cache, Logger: slog.New(slog.NewTextHandler(&audit, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	for p, h := range api.Handlers() {
		mux.Handle(p, h)
	}
	return mux, cache, &audit
}

func call(h http.Handler, method, path, token, body string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestTheAdminAPIAuthenticatesEveryRequest(t *testing.T) {
	h, _, _ := newAPI(t)
	for _, c := range []struct {
		name, method, path, token string
		want                      int
		challenge                 string
	}{
		{"no token", "GET", "/admin/v1/limits", "", 401, `Bearer realm="rl-exporter admin"`},
		{"a wrong token", "GET", "/admin/v1/limits", "nope-0123456789abcdef", 401, `error="invalid_token"`},
		{"a wrong token on a change", "PUT", "/admin/v1/limits/free", "nope-0123456789abcdef", 401, `error="invalid_token"`},
		{"another scheme", "GET", "/admin/v1/limits", "", 401, "Bearer"},
		{"a read-only token reading", "GET", "/admin/v1/limits", roToken, 200, ""},
		{"a read-only token changing a limit", "PUT", "/admin/v1/limits/free", roToken, 403, ""},
		{"a read-only token deleting", "DELETE", "/admin/v1/limits/public/free", roToken, 403, ""},
		{"the read-write token changing a limit", "PUT", "/admin/v1/limits/free", rwToken, 200, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest(c.method, c.path, strings.NewReader(`{"max_requests": 20}`))
			if c.token != "" {
				r.Header.Set("Authorization", "Bearer "+c.token)
			}
			if c.name == "another scheme" {
				r.SetBasicAuth("ops", rwToken)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != c.want {
				t.Fatalf("status %d, want %d: %s", w.Code, c.want, w.Body)
			}
			if got := w.Header().Get("WWW-Authenticate"); !strings.Contains(got, c.challenge) || (c.want == 401) != (got != "") {
				t.Errorf("WWW-Authenticate %q, want %q", got, c.challenge)
			}
		})
	}
	if _, err := New(Config{}); err != ErrNoTokens {
		t.Errorf("New without tokens: %v, want ErrNoTokens", err)
	}
}

func TestAChangeIsValidatedLikeTheFileAppliedAndAudited(t *testing.T) {
	h, cache, audit := newAPI(t)
	bad := map[string]string{
		`{"max_requests": 0}`:                         "max_requests",
		`{"window": "-1m"}`:                           "window",
		`{"algorithm": "magic"}`:                      "algorithm",
		`{"max_requests": 3}`:                         "cost", // below the bulk class's cost of 5
		`{"max_requests": 5, "bogus": 1}`:             "bogus",
		`{"max_requests": "5"}`:                       "max_requests",
		`{"max_requests": 5, "expires_in": "-1h"}`:    "expires_in",
		`{"max_requests": 5, "rollout_percent": 101}`: "rollout_percent",
	}
	for body, want := range bad {
		w := call(h, "PUT", "/admin/v1/limits/free", rwToken, body)
		if w.Code != 400 || !strings.Contains(w.Body.String(), want) {
			t.Errorf("PUT %s: %d %s, want 400 naming %q", body, w.Code, w.Body, want)
		}
	}
	if w := call(h, "PUT", "/admin/v1/limits/gold", rwToken, `{"max_requests": 5}`); w.Code != 404 {
		t.Errorf("unknown tier: %d", w.Code)
	}
	if w := call(h, "PUT", "/admin/v1/limits/nope/free", rwToken, `{"max_requests": 5}`); w.Code != 404 {
		t.Errorf("unknown class: %d", w.Code)
	}
	w := call(h, "PUT", "/admin/v1/limits/public/free", rwToken, `{"rate": "20/1m", "burst": 30, "rollout_percent": 25, "expires_in": "1h"}`)
	if w.Code != 200 {
		t.Fatalf("PUT: %d %s", w.Code, w.Body)
	}
	var got List
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Limits) != 1 || got.Limits[0].Live == nil || got.Limits[0].Live.MaxRequests != 20 || got.Limits[0].Live.Burst != 30 ||
		got.Limits[0].RolloutPercent != 25 || got.Limits[0].ExpiresAt == nil || got.Limits[0].Source != "rl:config:public:free" {
		t.Errorf("answer %s", w.Body)
	}
	// Raise the rollout with one call.
	if w := call(h, "PATCH", "/admin/v1/limits/public/free", rwToken, `{"rollout_percent": 100}`); w.Code != 200 {
		t.Fatalf("PATCH: %d %s", w.Code, w.Body)
	}
	if ap := cache.Overlay()["public"]["free"]; ap.RolloutPercent != 100 || ap.Limit.Rate != 20 {
		t.Errorf("after PATCH: %+v", ap)
	}
	// Roll back with one call.
	if w := call(h, "DELETE", "/admin/v1/limits/public/free", rwToken, ""); w.Code != 200 {
		t.Fatalf("DELETE: %d %s", w.Code, w.Body)
	}
	if _, ok := cache.Overlay()["public"]; ok {
		t.Errorf("after DELETE the overlay still has %+v", cache.Overlay())
	}
	if w := call(h, "DELETE", "/admin/v1/limits/public/free", rwToken, ""); w.Code != 404 {
		t.Errorf("second DELETE: %d", w.Code)
	}
	log := audit.String()
	for _, want := range []string{"token=ops", "action=put", "action=patch", "action=delete", "key=rl:config:public:free",
		`old="(configured limit)"`, "rollout_percent=25", "rollout_percent=100"} {
		if !strings.Contains(log, want) {
			t.Errorf("audit log lacks %q:\n%s", want, log)
		}
	}
	if strings.Contains(log, rwToken) {
		t.Errorf("the audit log shows the token")
	}
}
