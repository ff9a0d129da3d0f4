package server_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/eventually"
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
