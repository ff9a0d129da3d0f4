package server_test

import (
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

func TestWithAdminTokensTheTopLimitedKeysAndProfilesNeedOne(t *testing.T) {
	cfg := writeConfig(t, "classes: {default: {limits: {default: {algorithm: fixed_window, rate: 1, period: 1h}}}}\n")
	// No Redis: the admin API of live limits is off, the token check is not.
	p := startServeEnv(t, tokensEnv, []string{"main", "admin"}, "--config", cfg, "--admin-listen", "127.0.0.1:0")
	for range 3 {
		get(t, p.url("main", "/orders"), nil)
	}
	for _, path := range []string{"/debug/top-limited", "/debug/pprof/", "/debug/pprof/heap?debug=1"} {
		for _, c := range []struct {
			name, token string
			want        int
		}{{"no token", "", 401}, {"a wrong token", "wrong-0123456789abcdef", 401}, {"a read-only token", grafanaToken, 200}, {"the read-write token", opsToken, 200}} {
			code, body, hdr := adminCall(t, p, "GET", path, c.token, "")
			if code != c.want {
				t.Errorf("%s with %s: %d, want %d", path, c.name, code, c.want)
			}
			if c.want == 401 && (strings.Contains(body, "127.0.0.1") || !strings.HasPrefix(hdr.Get("WWW-Authenticate"), "Bearer")) {
				t.Errorf("%s with %s: WWW-Authenticate %q, body %q: want a Bearer challenge and no client key", path, c.name, hdr.Get("WWW-Authenticate"), body)
			}
			if c.want == 200 && path == "/debug/top-limited" && !strings.Contains(body, "ip:127.0.0.1") {
				t.Errorf("%s with %s: %q, want the limited client", path, c.name, body)
			}
		}
	}
}

func TestSlowClientsAreCutOffAndCountedOnMetrics(t *testing.T) {
	up := upstream(t)
	cfg := writeConfig(t, "server: {read_timeout: 1s, read_header_timeout: 1s}\n")
	p := startServe(t, []string{"main"}, "--config", cfg, "--upstream", up.URL)
	const clients = 20
	stop := make(chan struct{})
	time.AfterFunc(10*time.Second, func() { close(stop) })
	done := make(chan time.Duration, clients)
	for range clients {
		go func() {
			open, err := trickle(p.addrs["main"], "POST /upload HTTP/1.1\r\nHost: api\r\nContent-Length: 100\r\n\r\n", stop)
			if err != nil {
				t.Errorf("%v after %s", err, open)
			}
			done <- open
		}()
	}
	var worst time.Duration
	for range clients {
		worst = max(worst, <-done)
	}
	if worst > 3*time.Second {
		t.Errorf("a slow client held its connection for %s, want about server.read_timeout 1s", worst)
	}
	if got := metric(t, p, `rate_limit_slow_clients_total{listener="main"}`); got != clients {
		t.Errorf(`rate_limit_slow_clients_total{listener="main"} %g, want %d`, got, clients)
	}
	// The process still serves.
	c, err := net.Dial("tcp", p.addrs["main"])
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = io.WriteString(c, "GET /x HTTP/1.1\r\nHost: api\r\nConnection: close\r\n\r\n")
	b, _ := io.ReadAll(c)
	if !strings.HasPrefix(string(b), "HTTP/1.1 200") {
		t.Errorf("after the slow clients: %q, want 200", string(b)[:min(len(b), 40)])
	}
}
