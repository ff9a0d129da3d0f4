package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/redistest"
)

// liveListConfig: class chat holds two limits per pro client, 5 requests a minute (rpm) and
// 100 an hour (rph).
const liveListConfig = `
tiers: {names: [free, pro], default: free, header: X-Plan-Tier}
identity: {trusted_header_peers: [127.0.0.1]}
default_class: chat
classes:
  chat:
    limits:
      free: {algorithm: fixed_window, rate: 2, period: 1m}
      pro:
        - {name: rpm, algorithm: fixed_window, rate: 5, period: 1m}
        - {name: rph, algorithm: fixed_window, rate: 100, period: 1h}
live: {refresh_interval: 300ms}
`

// checkRefusedBy asks the decision API of p and returns the status and the refusing limits.
func checkRefusedBy(t *testing.T, p *proc, key, tier string) (int, []string) {
	t.Helper()
	body := fmt.Sprintf(`{"key":%q,"endpoint":"POST /v1/chat","plan_tier":%q}`, key, tier)
	resp, err := http.Post(p.url("main", "/v1/check"), "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		RefusedBy []string `json:"refused_by"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, out.RefusedBy
}

func TestALiveChangeOfOneOfATiersSeveralLimitsAppliesByItsNameOnEveryInstance(t *testing.T) {
	rdb := redistest.Single(t)
	cfg := writeConfig(t, liveListConfig)
	a := startServeEnv(t, tokensEnv, []string{"main", "admin"}, "--config", cfg, "--redis-url", rdb.URL(), "--admin-listen", "127.0.0.1:0")
	b := startServeEnv(t, tokensEnv, []string{"main", "admin"}, "--config", cfg, "--redis-url", rdb.URL(), "--admin-listen", "127.0.0.1:0")

	// The tier as a whole is not a target: its limits are.
	code, body, _ := adminCall(t, a, "PUT", "/admin/v1/limits/chat/pro", opsToken, `{"max_requests": 2}`)
	if code != http.StatusNotFound || !strings.Contains(body, "/{class}/{tier}/{limit}") {
		t.Errorf("PUT on a tier of several limits: %d %s, want 404 naming the limit's path", code, body)
	}
	code, body, _ = adminCall(t, a, "PUT", "/admin/v1/limits/chat/pro/rpx", opsToken, `{"max_requests": 2}`)
	if code != http.StatusNotFound || !strings.Contains(body, `\"rpx\"`) {
		t.Errorf("PUT on an unknown limit: %d %s, want 404 naming it", code, body)
	}
	code, body, _ = adminCall(t, a, "PUT", "/admin/v1/limits/chat/pro/rpm", opsToken, `{"max_requests": 2}`)
	if code != http.StatusOK {
		t.Fatalf("PUT rpm: %d %s", code, body)
	}
	var list struct {
		Limits []struct {
			Limit, Source string
			Live          *struct {
				MaxRequests int64 `json:"max_requests"`
			}
		}
	}
	if err := json.Unmarshal([]byte(body), &list); err != nil || len(list.Limits) != 1 || list.Limits[0].Limit != "rpm" ||
		list.Limits[0].Live == nil || list.Limits[0].Live.MaxRequests != 2 || list.Limits[0].Source != "rl:config:chat:pro:rpm" {
		t.Errorf("PUT answer %s (%v): want rpm alone, live at 2, from rl:config:chat:pro:rpm", body, err)
	}

	// Both instances hold a fresh pro client to rpm's 2 a minute; rph and the free tier keep the file's.
	n := 0
	within(t, time.Second, "the change on the other instance", func() bool {
		n++
		key := fmt.Sprintf("probe%d", n)
		for range 2 {
			checkRefusedBy(t, b, key, "pro")
		}
		code, by := checkRefusedBy(t, b, key, "pro")
		return code == http.StatusTooManyRequests && slices.Equal(by, []string{"rpm"})
	})
	for i, p := range []*proc{a, b, a} {
		code, by := checkRefusedBy(t, p, "user:carol", "pro")
		if want := i < 2; (code == http.StatusOK) != want {
			t.Errorf("carol's request %d: %d %v, want allowed %v under rpm's live 2", i+1, code, by, want)
		}
	}
	if code, _ := checkRefusedBy(t, a, "user:dave", "free"); code != http.StatusOK {
		t.Errorf("free tier: %d", code)
	}
	code, body, _ = adminCall(t, b, "GET", "/admin/v1/limits/chat/pro", grafanaToken, "")
	list.Limits = nil
	if err := json.Unmarshal([]byte(body), &list); err != nil || code != http.StatusOK || len(list.Limits) != 2 ||
		list.Limits[1].Limit != "rph" || list.Limits[1].Source != "file" || list.Limits[0].Source != "rl:config:chat:pro:rpm" {
		t.Errorf("GET the tier: %d %s, want rpm live beside rph from the file", code, body)
	}
	if code, body, _ := adminCall(t, a, "DELETE", "/admin/v1/limits/chat/pro/rpm", opsToken, ""); code != http.StatusOK {
		t.Fatalf("DELETE: %d %s", code, body)
	}
	within(t, time.Second, "the deletion on the other instance", func() bool {
		n++
		key := fmt.Sprintf("probe%d", n)
		for range 2 {
			checkRefusedBy(t, b, key, "pro")
		}
		code, _ := checkRefusedBy(t, b, key, "pro")
		return code == http.StatusOK
	})
}
