package server_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/eventually"
	"github.com/rl-exporter/rl-exporter/internal/redistest"
)

// documentedACL returns the words of the ACL SETUSER command
// docs/multi-region.md gives for the user of every region's Redis, with
// its password replaced by password.
func documentedACL(t *testing.T, password string) []string {
	t.Helper()
	f, err := os.Open("../docs/multi-region.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "ACL SETUSER ") {
			continue
		}
		words := strings.Fields(line)
		for i, w := range words {
			if strings.HasPrefix(w, ">") {
				words[i] = ">" + password
			}
		}
		return words
	}
	t.Fatal("docs/multi-region.md has no ACL SETUSER line")
	return nil
}

func TestEveryRegionModeDecidesAsTheDocumentedLeastPrivilegeACLUser(t *testing.T) {
	const password = "s3cret-for-the-test"
	acl := documentedACL(t, password)
	user := acl[2]
	own, peer := redistest.Single(t), redistest.Single(t)
	for _, s := range []*redistest.Server{own, peer} {
		if _, err := s.Do(acl...); err != nil {
			t.Fatalf("%v: %v", acl, err)
		}
		if _, err := s.Do("ACL", "LOG", "RESET"); err != nil {
			t.Fatal(err)
		}
	}
	pw := filepath.Join(t.TempDir(), "redis-password")
	if err := os.WriteFile(pw, []byte(password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	redis := func(s *redistest.Server) string {
		return fmt.Sprintf(`{url: %q, username: %s, password_file: %q}`, s.URL(), user, pw)
	}
	in := buildInstance(t, fmt.Sprintf(`
server: {listen: "127.0.0.1:0"}
reload: {watch: false}
store: {type: redis, timeout: 1s, fail_policy: closed, redis: %s}
region: {name: a, sync_interval: 20ms, peers: {b: %s}, tier_homes: {default: b}}
classes:
  default:
    region_mode: hybrid
    limits: {default: {algorithm: token_bucket, rate: 1000, period: 1m}}
  strict: {routes: ["GET /strict"], region_mode: strict, limits: {default: {algorithm: gcra, rate: 1000, period: 1m}}}
  async: {routes: ["GET /async"], region_mode: async, limits: {default: {algorithm: sliding_window, rate: 1000, period: 1m}}}
  fixed: {routes: ["GET /fixed"], region_mode: async, limits: {default: {algorithm: fixed_window, rate: 1000, period: 1m}}}
  local: {routes: ["GET /local"], limits: {default: {algorithm: sliding_log, rate: 1000, period: 1m}}}
`, redis(own), redis(peer)))
	ctx := context.Background()
	for _, endpoint := range []string{"GET /", "GET /strict", "GET /async", "GET /fixed", "GET /local"} {
		for i := range 5 {
			a, code := in.decideOn(ctx, t, fmt.Sprintf("client-%d", i), endpoint)
			if code != 200 || !a.Allowed || a.Degraded {
				t.Errorf("%s as %s: %d %+v", endpoint, user, code, a)
			}
		}
	}
	// Shipping rounds to the peer succeed as the user too.
	eventually.True(t, 5*time.Second, "a shipping round to the peer reports its lag", func() bool {
		return in.metric(t, "rate_limit_region_sync_lag_seconds", `peer_region="b"`) != 0
	})
	if n := in.metric(t, "rate_limit_region_sync_errors_total"); n != 0 {
		t.Errorf("%v shipping rounds failed as %s", n, user)
	}
	for name, s := range map[string]*redistest.Server{"own": own, "peer": peer} {
		denied, err := s.Do("ACL", "LOG")
		if err != nil {
			t.Fatal(err)
		}
		if l, _ := denied.([]any); len(l) > 0 {
			t.Errorf("the %s Redis denied %s: %v", name, user, denied)
		}
	}
}
