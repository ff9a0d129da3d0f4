package server_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/eventually"
	"github.com/rl-exporter/rl-exporter/internal/redistest"
)

// pings is how many PINGs Redis has served.
func pings(t *testing.T, rdb *redistest.Server) int {
	t.Helper()
	info, err := rdb.Info("commandstats")
	if err != nil {
		t.Fatal(err)
	}
	calls, _, _ := strings.Cut(strings.TrimPrefix(info["cmdstat_ping"], "calls="), ",")
	if calls == "" {
		return 0
	}
	n, err := strconv.Atoi(calls)
	if err != nil {
		t.Fatalf("cmdstat_ping %q: %v", info["cmdstat_ping"], err)
	}
	return n
}

func TestReadyzCostsTheStoreAtMostOnePingPerReadyTimeout(t *testing.T) {
	rdb := redistest.Single(t)
	p := startServe(t, []string{"main"}, "--redis-url", rdb.URL(), "--config", writeConfig(t, "server: {ready_timeout: 1s}\n"))
	before := pings(t, rdb)
	start := time.Now()
	const calls = 300
	for range calls {
		if resp := get(t, p.url("main", "/readyz"), nil); resp.StatusCode != 200 {
			t.Fatalf("/readyz %d: %s", resp.StatusCode, readBody(resp))
		}
	}
	took := time.Since(start)
	got := pings(t, rdb) - before
	// One check per second of calls, and one more for a second begun.
	if want := int(took/time.Second) + 2; got > want {
		t.Errorf("%d calls of /readyz in %s made %d PINGs, want at most %d (one per server.ready_timeout)", calls, took, got, want)
	}
	if got < 1 {
		t.Errorf("%d calls of /readyz made no PING: the store was never checked", calls)
	}
}

func TestReadyzSaysTheStoreIsUnavailableAndOnlyTheLogSaysWhere(t *testing.T) {
	rdb := redistest.Single(t)
	p := startServe(t, []string{"main"}, "--redis-url", rdb.URL())
	rdb.Stop()
	var body string
	var rd struct{ Store, Reason string }
	eventually.True(t, 10*time.Second, "/readyz says the store is down after Redis stopped", func() bool {
		body = readBody(get(t, p.url("main", "/readyz"), nil))
		_ = json.Unmarshal([]byte(body), &rd)
		return rd.Store == "down"
	})
	if rd.Reason != "store unavailable" {
		t.Errorf("/readyz reason %q, want %q", rd.Reason, "store unavailable")
	}
	port := strconv.Itoa(rdb.Port())
	for _, secret := range []string{port, "refused", "dial", "tcp"} {
		if strings.Contains(body, secret) {
			t.Errorf("/readyz %s shows %q: the store's address and error are for the log", body, secret)
		}
	}
	waitFor(t, func() bool { return strings.Contains(p.log(), "store unreachable") && strings.Contains(p.log(), port) })
}
