package server_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/eventually"
	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/rlqs/filtersim"
)

// TestRLQSOnTheGRPCListener: with rlqs.enabled the quota service answers on the gRPC listener
// beside the rate limit service, from the same domain files, and abandons a bucket whose rule a
// reload of rls.config_dir removes.
func TestRLQSOnTheGRPCListener(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "shop.yaml")
	if err := os.WriteFile(file, fmt.Appendf(nil, grpcDomain, 8640), 0o600); err != nil {
		t.Fatal(err)
	}
	srv, _ := buildGRPC(t, "", dir, "rlqs: {enabled: true, interval: 200ms, assignment_ttl: 2s}")
	c := filtersim.Start(filtersim.Config{Addrs: []string{srv.GRPCAddr()}, Domain: "shop", ReportInterval: time.Second})
	t.Cleanup(c.Close)
	alice := map[string]string{"user": "alice"}
	c.Request(alice)
	eventually.True(t, 3*time.Second, "a token bucket of 8640 a day", func() bool {
		s, _ := c.Assignment(alice)
		tb := s.GetTokenBucket()
		// 0.1/s, refilled in the whole seconds that make it exact to a thousandth.
		return tb != nil && tb.GetTokensPerFill().GetValue() == 1000 && tb.GetFillInterval().AsDuration() == 10000*time.Second
	})
	if err := os.WriteFile(file, []byte("domain: shop\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 5*time.Second, "the bucket abandoned on reload", func() bool {
		_, cached := c.Assignment(alice)
		return !cached
	})
}

// TestRLQSMetricsAndUnrenewedAssignments: /metrics shows the quota service's streams and each
// rule's demand and assigned share; when the store (Redis) stops answering, the assignments
// run out unrenewed and are counted, by rule, with the failed exchanges.
func TestRLQSMetricsAndUnrenewedAssignments(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "chat.yaml"), []byte(rlqsChatDomain), 0o600); err != nil {
		t.Fatal(err)
	}
	rds := redistest.Single(t)
	srv, _ := buildGRPC(t, "", dir, "rlqs: {enabled: true, interval: 200ms, assignment_ttl: 1s}",
		fmt.Sprintf("store: {type: redis, redis: {url: %q}}", rds.URL()))
	c := filtersim.Start(filtersim.Config{Addrs: []string{srv.GRPCAddr()}, Domain: "chat", ReportInterval: 200 * time.Millisecond})
	t.Cleanup(c.Close)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.Offer(ctx, rlqsChat, 40)
	var m string
	eventually.True(t, 5*time.Second, "streams, demand and the whole limit assigned on /metrics", func() bool {
		m = scrapeMain(t, srv)
		return strings.Contains(m, "rate_limit_rlqs_streams 1\n") &&
			strings.Contains(m, `rate_limit_quota_share{endpoint="chat.name_chat",kind="assigned"} 100`+"\n") &&
			regexp.MustCompile(`rate_limit_quota_share\{endpoint="chat.name_chat",kind="demand"\} (3\d|4\d)(\.\d+)?\n`).MatchString(m)
	})
	if !strings.Contains(m, `rate_limit_rlqs_assignments_expired_total{endpoint="chat.name_chat"} 0`) {
		t.Errorf("no expired counter at zero for chat.name_chat:\n%s", grepLines(m, "rlqs"))
	}
	if n, ok := keys(t, rds); !ok || n != 1 {
		t.Errorf("%d quota hashes in Redis, want 1: the demands live in the Redis store", n)
	}
	rds.Stop()
	eventually.True(t, 5*time.Second, "an unrenewed assignment counted", func() bool {
		m = scrapeMain(t, srv)
		return strings.Contains(m, `rate_limit_rlqs_assignments_expired_total{endpoint="chat.name_chat"} 1`) &&
			!strings.Contains(m, "rate_limit_rlqs_store_errors_total 0\n")
	})
}

// keys counts the quota hashes in rds.
func keys(t *testing.T, rds *redistest.Server) (int, bool) {
	t.Helper()
	v, err := rds.Do("KEYS", "rl:quota:*")
	if err != nil {
		t.Fatal(err)
	}
	ks, ok := v.([]any)
	return len(ks), ok
}

const rlqsChatDomain = `domain: chat
descriptors:
  - key: name
    value: chat
    rate_limit: {unit: second, requests_per_unit: 100}
`

// startRLQSReplica runs `rl-exporter serve` with the quota service on the Redis at url, its
// buckets matched by dir's domain files, and returns it once its gRPC listener is bound.
func startRLQSReplica(t *testing.T, url, dir string) *proc {
	t.Helper()
	cfg := writeConfig(t, fmt.Sprintf(`server: {grpc_listen: "127.0.0.1:0"}
rls: {config_dir: %q}
rlqs: {enabled: true, interval: 1s, assignment_ttl: 5s}
store: {type: redis, redis: {url: %q}}
`, dir, url))
	return startServe(t, []string{"main", "grpc"}, "--config", cfg)
}

var rlqsChat = map[string]string{"name": "chat"}

// assignedRate is the refill rate of the token bucket c holds for the chat bucket, 0 for none.
func assignedRate(c *filtersim.Client) float64 {
	s, _ := c.Assignment(rlqsChat)
	tb := s.GetTokenBucket()
	if tb == nil || tb.GetFillInterval().GetSeconds() == 0 {
		return 0
	}
	return float64(tb.GetTokensPerFill().GetValue()) / float64(tb.GetFillInterval().GetSeconds())
}
