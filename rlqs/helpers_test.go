package rlqs

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"

	"github.com/rl-exporter/rl-exporter/quota"
	"github.com/rl-exporter/rl-exporter/rlqs/filtersim"
	"github.com/rl-exporter/rl-exporter/rls"
)

const chatRules = `
domain: chat
descriptors:
  - key: name
    value: chat
    rate_limit: {unit: second, requests_per_unit: 100}
  - key: name
    value: banned
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: name
    value: free
    rate_limit: {unlimited: true}
`

// loadRules writes src as a domain file of a new directory and loads it.
func loadRules(t testing.TB, src string) (*rls.Rules, string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "chat.yaml"), []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := rls.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return r, dir
}

// server is a Service on a gRPC listener, running its intervals.
type server struct {
	svc     *Service
	addr    string
	stopRun func() // stops the intervals alone, as a replica that is stopping
	stop    func()
}

func startServer(t testing.TB, cfg Config, rules *rls.Rules) *server {
	t.Helper()
	svc, err := New(cfg, rules)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	rlqsv3.RegisterRateLimitQuotaServiceServer(gs, svc)
	ctx, cancel := context.WithCancel(context.Background())
	served, ran := make(chan struct{}), make(chan struct{})
	go func() { _ = gs.Serve(ln); close(served) }()
	go func() { svc.Run(ctx); close(ran) }()
	s := &server{svc: svc, addr: ln.Addr().String()}
	s.stopRun = func() {
		cancel()
		<-ran
	}
	var once sync.Once
	s.stop = func() {
		once.Do(func() {
			s.stopRun()
			gs.Stop()
			<-served
		})
	}
	t.Cleanup(s.stop)
	return s
}

// client starts a filter reporting every interval to addrs.
func client(t testing.TB, interval time.Duration, addrs ...string) *filtersim.Client {
	t.Helper()
	c := filtersim.Start(filtersim.Config{Addrs: addrs, Domain: "chat", ReportInterval: interval})
	t.Cleanup(c.Close)
	return c
}

// bucketRate is the refill rate of the token bucket c holds for bucket, 0 for none.
func bucketRate(c *filtersim.Client, bucket map[string]string) float64 {
	s, _ := c.Assignment(bucket)
	tb := s.GetTokenBucket()
	if tb == nil || tb.GetFillInterval().GetSeconds() == 0 {
		return 0
	}
	return float64(tb.GetTokensPerFill().GetValue()) / float64(tb.GetFillInterval().GetSeconds())
}

func blanket(c *filtersim.Client, bucket map[string]string) (typev3.RateLimitStrategy_BlanketRule, bool) {
	s, _ := c.Assignment(bucket)
	if _, ok := s.GetStrategy().(*typev3.RateLimitStrategy_BlanketRule_); !ok {
		return 0, false
	}
	return s.GetBlanketRule(), true
}

// switchStore is a memory store that fails while fail is set.
type switchStore struct {
	quota.MemoryStore
	fail atomic.Bool
}

func (s *switchStore) Exchange(ctx context.Context, key string, mine []quota.Demand, gone []string, now time.Time, stale time.Duration) ([]quota.Demand, error) {
	if s.fail.Load() {
		return nil, errors.New("store down")
	}
	return s.MemoryStore.Exchange(ctx, key, mine, gone, now, stale)
}

func filtersimNoDomain(t testing.TB, addr string) *filtersim.Client {
	c := filtersim.Start(filtersim.Config{Addrs: []string{addr}, ReportInterval: time.Hour})
	t.Cleanup(c.Close)
	return c
}
