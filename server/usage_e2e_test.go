package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// usageOf decodes a usage answer: the used and remaining of its first limit.
func usageOf(t *testing.T, body string) (used, remaining int64) {
	t.Helper()
	var r struct {
		Limits []struct{ Used, Remaining int64 }
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil || len(r.Limits) == 0 {
		t.Fatalf("usage body %q: %v, want at least one limit", body, err)
	}
	return r.Limits[0].Used, r.Limits[0].Remaining
}

// The usage API answers the decision API's peers on the main listener and
// any admin token, read-only included, on the admin listener.
func TestUsageAnswersTheDecisionAPIsPeersAndAnyAdminToken(t *testing.T) {
	cfg := fivePerMinute + "server: {check_api: {allowed_peers: [127.0.0.1/32]}}\n"
	p := startServeEnv(t, tokensEnv, []string{"main", "admin"}, "--config", writeConfig(t, cfg), "--admin-listen", "127.0.0.1:0")
	for range 2 {
		if code, _, body := postCheck(t, fromAddr("127.0.0.1"), p.url("main", "/v1/check"), `{"key":"user:alice","endpoint":"GET /a"}`, nil); code != 200 {
			t.Fatalf("check: %d %s", code, body)
		}
	}
	getFrom := func(c *http.Client, url string, hdr map[string]string) (int, string) {
		req, _ := http.NewRequest("GET", url, nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := getFrom(fromAddr("127.0.0.1"), p.url("main", "/v1/usage?key=user:alice"), nil)
	if code != 200 {
		t.Fatalf("usage from 127.0.0.1: %d %s", code, body)
	}
	if u, r := usageOf(t, body); u != 2 || r != 3 {
		t.Errorf("usage from 127.0.0.1: used %d remaining %d, want 2 and 3", u, r)
	}
	if code, body := getFrom(fromAddr("127.0.0.2"), p.url("main", "/v1/usage?key=user:alice"), nil); code != 403 || !strings.Contains(body, "/v1/usage answers only the peers") {
		t.Errorf("usage from 127.0.0.2: %d %s, want 403 naming /v1/usage", code, body)
	}
	admin := p.url("admin", "/admin/v1/usage?key=user:alice")
	if code, _ := getFrom(http.DefaultClient, admin, nil); code != 401 {
		t.Errorf("admin usage without a token: %d, want 401", code)
	}
	code, body = getFrom(http.DefaultClient, admin, map[string]string{"Authorization": "Bearer " + grafanaToken})
	if code != 200 {
		t.Fatalf("admin usage with the read-only token: %d %s", code, body)
	}
	if u, r := usageOf(t, body); u != 2 || r != 3 {
		t.Errorf("admin usage: used %d remaining %d, want 2 and 3 (reading twice took nothing)", u, r)
	}
}
