package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rl-exporter/rl-exporter/httplimit"
	"github.com/rl-exporter/rl-exporter/limiter"
)

// apiKeyUsageServer serves the usage API of a free/pro policy where demo-pro-key is a pro key,
// after three requests with it sent as Bearer.
func apiKeyUsageServer(t *testing.T) *httptest.Server {
	t.Helper()
	p, err := httplimit.NewPolicy(httplimit.PolicyConfig{
		Store: limiter.NewMemoryStore(limiter.MemoryConfig{}),
		Tiers: []string{"free", "pro"}, DefaultTier: "free",
		Classes: []httplimit.Class{{Name: "default", Limits: map[string]limiter.Limit{
			"free": limiter.PerMinute(limiter.FixedWindow, 10), "pro": limiter.PerMinute(limiter.FixedWindow, 1000)}}},
		Identity: httplimit.IdentityConfig{APIKeyHeaders: []string{"Authorization"}, TierByAPIKey: map[string]string{"demo-pro-key": "pro"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	m, err := httplimit.New(httplimit.Config{Policy: p})
	if err != nil {
		t.Fatal(err)
	}
	h := m.Handler(http.NotFoundHandler())
	for range 3 {
		r := httptest.NewRequest("POST", "/v1/chat/completions", nil)
		r.Header.Set("Authorization", "Bearer demo-pro-key")
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	srv := httptest.NewServer(m.UsageHandler())
	t.Cleanup(srv.Close)
	return srv
}

// A tenant asks with the key it holds, from a flag, the environment or stdin: the table names
// the stored key, the key's own tier and what the proxy charged it.
func TestUsageByTheAPIKeyATenantHoldsFromAFlagTheEnvironmentOrStdin(t *testing.T) {
	srv := apiKeyUsageServer(t)
	stored := httplimit.APIKeyKey("demo-pro-key")
	for _, tc := range []struct {
		name  string
		args  []string
		env   environ
		stdin string
	}{
		{"a flag", []string{"--api-key", "demo-pro-key"}, nil, ""},
		{"the environment", nil, environ{apiKeyEnv + "=demo-pro-key"}, ""},
		{"stdin", []string{"--api-key", "-"}, nil, "demo-pro-key\n"},
	} {
		var out, errs bytes.Buffer
		ctx := withStdin(context.Background(), strings.NewReader(tc.stdin))
		args := append([]string{"usage", "--url", srv.URL + "/"}, tc.args...)
		if code := run(ctx, args, tc.env, &out, &errs); code != exitOK {
			t.Fatalf("%s: exit %d: %s", tc.name, code, errs.String())
		}
		first := strings.SplitN(out.String(), "\n", 2)[0]
		if !strings.Contains(first, "key "+stored) || !strings.Contains(first, "plan tier pro") {
			t.Errorf("%s: first line %q, want %s on pro", tc.name, first, stored)
		}
		var row []string
		for _, l := range strings.Split(out.String(), "\n") {
			if f := strings.Fields(l); len(f) > 5 && f[0] == "default" {
				row = f
			}
		}
		if len(row) < 6 || row[3] != "1000" || row[4] != "3" {
			t.Errorf("%s: row %v, want quota 1000, used 3:\n%s", tc.name, row, out.String())
		}
		if strings.Contains(out.String()+errs.String(), "demo-pro-key") {
			t.Errorf("%s: the output shows the key", tc.name)
		}
	}
	var out, errs bytes.Buffer
	if code := run(context.Background(), []string{"usage", "--url", srv.URL + "/", "--api-key", "invented"}, nil, &out, &errs); code != exitFailure ||
		!strings.Contains(errs.String(), "404") || strings.Contains(errs.String(), "invented") {
		t.Errorf("an unknown key: exit %d, stderr %q; want %d with the 404, without the key", code, errs.String(), exitFailure)
	}
	out.Reset()
	errs.Reset()
	if code := run(context.Background(), []string{"usage", "--url", srv.URL, "--api-key", "a", "--key", "user:1"}, nil, &out, &errs); code != exitUsage {
		t.Errorf("--key and --api-key: exit %d, want %d: %s", code, exitUsage, errs.String())
	}
}

// rl-exporter key prints the stored form of an API key: what GET /v1/usage?key= takes and what
// the docs show how to compute.
func TestKeyPrintsTheStoredFormOfAnAPIKey(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  []string
		env   environ
		stdin string
	}{
		{"a flag", []string{"--api-key", "demo-pro-key"}, nil, ""},
		{"the environment", nil, environ{apiKeyEnv + "=demo-pro-key"}, ""},
		{"stdin", []string{"--api-key", "-"}, nil, "demo-pro-key\n"},
	} {
		var out, errs bytes.Buffer
		if code := run(withStdin(context.Background(), strings.NewReader(tc.stdin)), append([]string{"key"}, tc.args...), tc.env, &out, &errs); code != exitOK {
			t.Fatalf("%s: exit %d: %s", tc.name, code, errs.String())
		}
		// What the docs compute it with: printf %s demo-pro-key | sha256sum | cut -c1-16
		if got := strings.TrimSpace(out.String()); got != "apikey:1fbfd5e2a34698de" {
			t.Errorf("%s: %q, want apikey:1fbfd5e2a34698de", tc.name, got)
		}
	}
	var out, errs bytes.Buffer
	if code := run(context.Background(), []string{"key"}, nil, &out, &errs); code != exitUsage || !strings.Contains(errs.String(), "--api-key") {
		t.Errorf("no key: exit %d, stderr %q", code, errs.String())
	}
}

// A raw API key given as --key names another budget than the proxy charged: the answer is
// printed (a decision API caller's key is any string) with a note that says so.
func TestUsageNotesARawAPIKeyGivenAsKey(t *testing.T) {
	srv := apiKeyUsageServer(t)
	var out, errs bytes.Buffer
	if code := run(context.Background(), []string{"usage", "--url", srv.URL, "--key", "demo-pro-key"}, nil, &out, &errs); code != exitOK ||
		!strings.Contains(errs.String(), "use --api-key") {
		t.Errorf("exit %d, stderr %q; want 0 and a note to use --api-key", code, errs.String())
	}
}
