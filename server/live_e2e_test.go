package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/eventually"
	"github.com/rl-exporter/rl-exporter/internal/redistest"
)

const (
	opsToken     = "ops-0123456789abcdef"
	grafanaToken = "grafana-0123456789abcdef"
)

var tokensEnv = []string{"RL_ADMIN__TOKENS=ops:read-write:" + opsToken + ",grafana:read-only:" + grafanaToken}

// liveConfig: tiers free and pro, one class "api" (2 per minute on free),
// one class "bulk"; a fast full refresh. X-Plan-Tier is trusted from this
// host, where the test plays the gateway.
const liveConfig = `
tiers: {names: [free, pro], default: free, header: X-Plan-Tier}
identity: {trusted_header_peers: [127.0.0.1]}
default_class: api
classes:
  api:
    limits:
      free: {algorithm: fixed_window, rate: 2, period: 1m}
      pro:  {algorithm: fixed_window, rate: 20, period: 1m}
  bulk:
    routes: ["/bulk/"]
    cost: 5
    limits:
      free: {algorithm: fixed_window, rate: 50, period: 1m}
live: {refresh_interval: 300ms}
`

// check asks the decision API of p and returns the status and the quota
// applied (the limit field).
func check(t *testing.T, p *proc, key, endpoint, tier string) (int, int64) {
	t.Helper()
	body := fmt.Sprintf(`{"key":%q,"endpoint":%q,"plan_tier":%q}`, key, endpoint, tier)
	resp, err := http.Post(p.url("main", "/v1/check"), "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct{ Limit int64 }
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, out.Limit
}

// adminCall sends one admin API request.
func adminCall(t *testing.T, p *proc, method, path, token, body string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, p.url("admin", path), strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// metric returns the value of one sample line of p's /metrics, or -1.
func metric(t *testing.T, p *proc, series string) float64 {
	t.Helper()
	body := readBody(get(t, p.url("main", "/metrics"), nil))
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, series+" ") {
			var v float64
			fmt.Sscan(strings.TrimPrefix(l, series+" "), &v)
			return v
		}
	}
	return -1
}

// within polls cond every 10ms for up to limit (longer under the race
// detector, where the time is not asserted) and returns the time it took.
func within(t *testing.T, limit time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	if raceEnabled {
		limit *= 5
	}
	return eventually.True(t, limit, what, cond)
}

func startLivePair(t *testing.T) (*proc, *proc, *redistest.Server) {
	t.Helper()
	rdb := redistest.Single(t)
	cfg := writeConfig(t, liveConfig)
	a := startServeEnv(t, tokensEnv, []string{"main", "admin"}, "--config", cfg, "--redis-url", rdb.URL(), "--admin-listen", "127.0.0.1:0")
	b := startServeEnv(t, tokensEnv, []string{"main", "admin"}, "--config", cfg, "--redis-url", rdb.URL(), "--admin-listen", "127.0.0.1:0")
	return a, b, rdb
}

func TestAPutThroughTheAdminAPIOfOneInstanceChangesDecisionsOnBothWithinASecond(t *testing.T) {
	a, b, _ := startLivePair(t)
	if _, lim := check(t, b, "k0", "GET /x", "free"); lim != 2 {
		t.Fatalf("limit %d before the change, want the file's 2", lim)
	}
	code, body, _ := adminCall(t, a, "PUT", "/admin/v1/limits/api/free", opsToken, `{"max_requests": 7}`)
	if code != 200 {
		t.Fatalf("PUT: %d %s", code, body)
	}
	n := 0
	took := within(t, time.Second, "the change on the other instance", func() bool {
		n++
		_, lim := check(t, b, fmt.Sprintf("k%d", n), "GET /x", "free")
		return lim == 7
	})
	t.Logf("instance b applied the PUT made on instance a after %s", took)
	// The new limit decides: 7 requests pass, the 8th is refused, on either instance.
	ok := 0
	for i := 0; i < 8; i++ {
		p := a
		if i%2 == 1 {
			p = b
		}
		if code, _ := check(t, p, "user:carol", "GET /x", "free"); code == 200 {
			ok++
		}
	}
	if ok != 7 {
		t.Errorf("%d of 8 requests allowed across both instances, want the live limit of 7", ok)
	}
	// The limit in force shows in rate_limit_limit on both.
	for _, p := range []*proc{a, b} {
		if v := metric(t, p, `rate_limit_limit{algorithm="fixed_window",endpoint="/",plan_tier="free"}`); v != 7 {
			t.Errorf("rate_limit_limit = %v on %s, want 7", v, p.addrs["main"])
		}
	}
	// The audit line names the token, never the token itself.
	if l := a.log(); !strings.Contains(l, `"token":"ops"`) || !strings.Contains(l, "max_requests=7") || strings.Contains(l, opsToken) {
		t.Errorf("audit line missing or showing the token:\n%s", l)
	}
	// DELETE: back to the file's value everywhere.
	if code, body, _ := adminCall(t, a, "DELETE", "/admin/v1/limits/api/free", opsToken, ""); code != 200 {
		t.Fatalf("DELETE: %d %s", code, body)
	}
	within(t, time.Second, "the deletion on the other instance", func() bool {
		n++
		_, lim := check(t, b, fmt.Sprintf("k%d", n), "GET /x", "free")
		return lim == 2
	})
}

func TestAMalformedValueWrittenStraightIntoRedisIsIgnoredCountedAndTheOldLimitKeepsApplying(t *testing.T) {
	a, b, rdb := startLivePair(t)
	if code, body, _ := adminCall(t, a, "PUT", "/admin/v1/limits/free", opsToken, `{"max_requests": 9}`); code != 200 {
		t.Fatalf("PUT: %d %s", code, body)
	}
	n := 0
	within(t, time.Second, "the good value", func() bool { n++; _, l := check(t, b, fmt.Sprint("m", n), "GET /x", "free"); return l == 9 })
	// An operator's typo, straight into the hash, announced or not.
	if _, err := rdb.Do("HSET", "rl:config:free", "max_requests", "nine"); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*proc{a, b} {
		within(t, 3*time.Second, "the error counted", func() bool { return metric(t, p, "rate_limit_config_errors_total") == 1 })
		if _, l := check(t, p, "later", "GET /x", "free"); l != 9 {
			t.Errorf("limit %d after the bad value, want the last good 9", l)
		}
		if !strings.Contains(p.log(), "live limit ignored") || !strings.Contains(p.log(), "max_requests") {
			t.Errorf("no error log naming the field:\n%s", p.log())
		}
	}
	// The admin API shows the error beside the value kept.
	code, body, _ := adminCall(t, a, "GET", "/admin/v1/limits/free", grafanaToken, "")
	if code != 200 || !strings.Contains(body, `"error"`) || !strings.Contains(body, `"max_requests": 9`) {
		t.Errorf("GET: %d %s", code, body)
	}
}

func TestALiveChangeWithAnExpiryRevertsOnTimeOnEveryInstance(t *testing.T) {
	a, b, _ := startLivePair(t)
	code, body, _ := adminCall(t, a, "PUT", "/admin/v1/limits/free", opsToken, `{"max_requests": 30, "expires_in": "1500ms"}`)
	if code != 200 {
		t.Fatalf("PUT: %d %s", code, body)
	}
	expiry := time.Now().Add(1500 * time.Millisecond)
	n := 0
	for _, p := range []*proc{a, b} {
		within(t, time.Second, "the change", func() bool { n++; _, l := check(t, p, fmt.Sprint("e", n), "GET /x", "free"); return l == 30 })
	}
	var wg sync.WaitGroup
	late := make([]time.Duration, 2)
	for i, p := range []*proc{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			for j := 0; ; j, _ = j+1, <-tick.C {
				_, l := check(t, p, fmt.Sprintf("r%d-%d", i, j), "GET /x", "free")
				if l == 2 {
					late[i] = time.Since(expiry)
					return
				}
				if time.Since(expiry) > 5*time.Second {
					late[i] = time.Hour
					return
				}
			}
		}()
	}
	wg.Wait()
	for i, l := range late {
		if l == time.Hour || (!raceEnabled && (l < -50*time.Millisecond || l > 500*time.Millisecond)) {
			t.Errorf("instance %d went back to the file's limit %s after the expiry, want within 500ms", i, l)
		}
	}
}

func TestAStagedRolloutCoversTheSameKeysOnEveryInstance(t *testing.T) {
	a, b, _ := startLivePair(t)
	if code, body, _ := adminCall(t, a, "PUT", "/admin/v1/limits/api/pro", opsToken, `{"max_requests": 40, "rollout_percent": 25}`); code != 200 {
		t.Fatalf("PUT: %d %s", code, body)
	}
	covered := func(p *proc) map[string]bool {
		out := map[string]bool{}
		for i := 0; i < 400; i++ {
			k := fmt.Sprintf("user:u%d", i)
			if _, l := check(t, p, k, "GET /x", "pro"); l == 40 {
				out[k] = true
			}
		}
		return out
	}
	n := 0
	within(t, time.Second, "the rollout on b", func() bool { n++; return len(covered(b)) > 0 })
	ca, cb := covered(a), covered(b)
	if len(ca) < 60 || len(ca) > 140 {
		t.Errorf("%d of 400 keys covered at 25 %%, want 100 ± 40", len(ca))
	}
	if fmt.Sprint(len(ca)) != fmt.Sprint(len(cb)) {
		t.Fatalf("a covers %d keys, b %d", len(ca), len(cb))
	}
	for k := range ca {
		if !cb[k] {
			t.Fatalf("%s covered on a, not on b", k)
		}
	}
	// Raised to 100 % with one call.
	if code, body, _ := adminCall(t, b, "PATCH", "/admin/v1/limits/api/pro", opsToken, `{"rollout_percent": 100}`); code != 200 {
		t.Fatalf("PATCH: %d %s", code, body)
	}
	within(t, time.Second, "100 % on a", func() bool { return len(covered(a)) == 400 })
}

func TestTheAdminAPIExistsOnlyWithATokenAndChecksIt(t *testing.T) {
	rdb := redistest.Single(t)
	cfg := writeConfig(t, liveConfig)
	none := startServe(t, []string{"main", "admin"}, "--config", cfg, "--redis-url", rdb.URL(), "--admin-listen", "127.0.0.1:0")
	if code, _, _ := adminCall(t, none, "GET", "/admin/v1/limits", opsToken, ""); code != 404 {
		t.Errorf("without a configured token: %d, want 404 (no admin API)", code)
	}
	p := startServeEnv(t, tokensEnv, []string{"main", "admin"}, "--config", cfg, "--redis-url", rdb.URL(), "--admin-listen", "127.0.0.1:0")
	for _, c := range []struct {
		name, method, token string
		want                int
	}{
		{"no token", "GET", "", 401},
		{"a wrong token", "GET", "wrong-0123456789abcdef", 401},
		{"a read-only token changing a limit", "PUT", grafanaToken, 403},
		{"a read-only token reading", "GET", grafanaToken, 200},
		{"the read-write token changing a limit", "PUT", opsToken, 200},
	} {
		code, body, hdr := adminCall(t, p, c.method, "/admin/v1/limits/free", c.token, `{"max_requests": 5}`)
		if code != c.want {
			t.Errorf("%s: %d %s, want %d", c.name, code, body, c.want)
		}
		if c.want == 401 && !strings.HasPrefix(hdr.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("%s: WWW-Authenticate %q", c.name, hdr.Get("WWW-Authenticate"))
		}
	}
	// Never on the main listener.
	if resp := get(t, p.url("main", "/admin/v1/limits"), map[string]string{"Authorization": "Bearer " + opsToken}); resp.StatusCode == 200 {
		t.Errorf("the admin API answers on the main listener")
	}
}

func TestPrecedenceIsFileThenEnvironmentThenFlag(t *testing.T) {
	rdb := redistest.Single(t)
	cfg := writeConfig(t, `
store: {type: memory}
classes: {default: {limits: {default: {algorithm: fixed_window, rate: 5, period: 1m}}}}
`)
	// The environment overrides the file's limit and store; the flag
	// overrides the environment's Redis URL (a port nothing listens on).
	env := []string{
		"RL_CLASSES__DEFAULT__LIMITS__DEFAULT__RATE=3",
		"RL_STORE__TYPE=redis", "RL_STORE__REDIS__URL=redis://127.0.0.1:1/0",
	}
	p := startServeEnv(t, env, []string{"main"}, "--config", cfg, "--redis-url", rdb.URL())
	if _, l := check(t, p, "k", "GET /x", ""); l != 3 {
		t.Errorf("limit %d, want the environment's 3 over the file's 5", l)
	}
	if resp := get(t, p.url("main", "/readyz"), nil); resp.StatusCode != 200 {
		t.Errorf("/readyz %d: the flag's Redis URL should win over the environment's", resp.StatusCode)
	}
	if !strings.Contains(p.log(), `"store":"redis"`) {
		t.Errorf("store is not the environment's redis:\n%s", p.log())
	}
	// An invalid environment value stops serve with status 1, naming the variable.
	cmd := exec.Command(binary, "serve", "--config", cfg, "--listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "RL_STORE__TIMEOUT=soon")
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "RL_STORE__TIMEOUT") {
		t.Errorf("serve with a bad variable: %v, want status 1 naming the variable\n%s", err, out)
	}
}

func TestTheConfigFileIsReloadedWhenValidAndKeptWhenNot(t *testing.T) {
	cfg := writeConfig(t, fivePerMinute+"reload: {interval: 200ms}\n")
	p := startServe(t, []string{"main"}, "--config", cfg)
	if _, l := check(t, p, "k", "GET /x", ""); l != 5 {
		t.Fatalf("limit %d, want 5", l)
	}
	write := func(s string) {
		if err := os.WriteFile(cfg, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(strings.Replace(fivePerMinute, "rate: 5", "rate: 8", 1) + "reload: {interval: 200ms}\n")
	n := 0
	within(t, 3*time.Second, "the valid edit", func() bool { n++; _, l := check(t, p, fmt.Sprint("v", n), "GET /x", ""); return l == 8 })
	write(strings.Replace(fivePerMinute, "rate: 5", "rate: 0", 1) + "reload: {interval: 200ms}\n")
	within(t, 3*time.Second, "the invalid edit counted", func() bool {
		return metric(t, p, `rate_limit_config_reloads_total{result="error"}`) == 1
	})
	if _, l := check(t, p, "after", "GET /x", ""); l != 8 {
		t.Errorf("limit %d after an invalid edit, want the previous 8", l)
	}
	if !strings.Contains(p.log(), "config reload rejected") || !strings.Contains(p.log(), "classes.default.limits.default.rate") {
		t.Errorf("no error log naming the key:\n%s", p.log())
	}
	if v := metric(t, p, `rate_limit_config_reloads_total{result="success"}`); v != 1 {
		t.Errorf("reloads success = %v, want 1", v)
	}
	// A store change is logged as needing a restart.
	write(strings.Replace(fivePerMinute, "rate: 5", "rate: 9", 1) + "reload: {interval: 200ms}\nstore: {timeout: 250ms}\n")
	within(t, 3*time.Second, "the restart notice", func() bool { return strings.Contains(p.log(), "need a restart") })
	if !strings.Contains(p.log(), "store.timeout") {
		t.Errorf("the restart notice does not name store.timeout")
	}
	n++
	if _, l := check(t, p, fmt.Sprint("v", n), "GET /x", ""); l != 9 {
		t.Errorf("limit %d, want 9: the limit of the same edit applies at once", l)
	}
}
