package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rl-exporter/rl-exporter/admin"
	"github.com/rl-exporter/rl-exporter/httplimit"
	"github.com/rl-exporter/rl-exporter/limiter"
)

// usageServer serves a middleware's usage API on both of its paths, the
// admin one wanting token, after two requests of ip:192.0.2.1 (httptest's address) on orders.
func usageServer(t *testing.T, token string) *httptest.Server {
	t.Helper()
	p, err := httplimit.NewPolicy(httplimit.PolicyConfig{
		Store: limiter.NewMemoryStore(limiter.MemoryConfig{}),
		Classes: []httplimit.Class{
			{Name: "default", Limits: map[string]limiter.Limit{"default": limiter.PerMinute(limiter.FixedWindow, 100)}},
			{Name: "orders", Routes: []string{"GET /orders/{id}"}, Limits: map[string]limiter.Limit{"default": limiter.PerHour(limiter.FixedWindow, 10)}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	m, err := httplimit.New(httplimit.Config{Policy: p})
	if err != nil {
		t.Fatal(err)
	}
	h := m.Handler(http.NotFoundHandler())
	for range 2 {
		r := httptest.NewRequest("GET", "/orders/1", nil)
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	g, err := admin.NewTokenGuard([]admin.Token{{Name: "grafana", Secret: token}})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(httplimit.UsagePath, m.UsageHandler())
	mux.Handle(admin.UsagePath, g.ReadOnly(m.UsageHandler()))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func TestUsagePrintsATableOfEveryLimit(t *testing.T) {
	srv := usageServer(t, "grafana-0123456789abcdef")
	for _, tc := range []struct {
		name string
		args []string
		env  environ
	}{
		{"the usage API", []string{"--key", "ip:192.0.2.1", "--url", srv.URL}, nil},
		{"the admin API", []string{"--key", "ip:192.0.2.1", "--url", srv.URL, "--admin"}, environ{"RL_USAGE_TOKEN=grafana-0123456789abcdef"}},
	} {
		var out, errs bytes.Buffer
		if code := run(context.Background(), append([]string{"usage"}, tc.args...), tc.env, &out, &errs); code != exitOK {
			t.Fatalf("%s: exit %d: %s", tc.name, code, errs.String())
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if !strings.Contains(lines[0], "ip:192.0.2.1") || !strings.Contains(lines[0], "default") {
			t.Errorf("%s: first line %q, want the key and its tier", tc.name, lines[0])
		}
		header := strings.Fields(lines[1])
		if strings.Join(header, " ") != "CLASS ENDPOINT ALGORITHM QUOTA USED REMAINING OPEN RESERVATIONS RESET EXHAUSTED AT" {
			t.Errorf("%s: header %q", tc.name, lines[1])
		}
		var orders []string
		for _, l := range lines[2:] {
			if f := strings.Fields(l); len(f) > 0 && f[0] == "orders" {
				orders = f
			}
		}
		if len(orders) < 6 || orders[1] != "GET /orders/{id}" && orders[2] != "/orders/{id}" {
			t.Fatalf("%s: no orders row in\n%s", tc.name, out.String())
		}
		if got := strings.Join(orders[4:8], " "); got != "10 2 8 0" {
			t.Errorf("%s: orders quota/used/remaining/open reservations %q, want \"10 2 8 0\"\n%s", tc.name, got, out.String())
		}
	}
}

func TestUsageRefusesBadInputWithAClearMessage(t *testing.T) {
	srv := usageServer(t, "grafana-0123456789abcdef")
	for _, tc := range []struct {
		name string
		args []string
		env  environ
		code int
		says string
	}{
		{"no key", []string{"--url", srv.URL}, nil, exitUsage, "--key: required"},
		{"a URL that is none", []string{"--key", "a", "--url", "::nope"}, nil, exitUsage, "--url"},
		{"an unknown tier", []string{"--key", "a", "--url", srv.URL, "--plan-tier", "gold"}, nil, exitFailure, `unknown tier "gold"`},
		{"the admin API without a token", []string{"--key", "a", "--url", srv.URL, "--admin"}, nil, exitUsage, "RL_USAGE_TOKEN"},
		{"the admin API with a wrong token", []string{"--key", "a", "--url", srv.URL, "--admin"}, environ{"RL_USAGE_TOKEN=wrong-0123456789abcdef"}, exitFailure, "401"},
		{"nothing listening", []string{"--key", "a", "--url", "http://127.0.0.1:1"}, nil, exitFailure, "127.0.0.1:1"},
	} {
		var out, errs bytes.Buffer
		code := run(context.Background(), append([]string{"usage"}, tc.args...), tc.env, &out, &errs)
		if code != tc.code || !strings.Contains(errs.String(), tc.says) {
			t.Errorf("%s: exit %d, stderr %q; want %d saying %q", tc.name, code, errs.String(), tc.code, tc.says)
		}
	}
}
