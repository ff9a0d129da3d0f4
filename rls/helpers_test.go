package rls_test

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/rl-exporter/rl-exporter/collector"
	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
	"github.com/rl-exporter/rl-exporter/rls"
)

// backend is a store the suite runs on.
type backend struct {
	name string
	// open returns a fresh store (its own state) for one test.
	open func(t *testing.T) limiter.Store
}

func memoryBackend() backend {
	return backend{name: "memory", open: func(*testing.T) limiter.Store {
		return limiter.NewMemoryStore(limiter.MemoryConfig{})
	}}
}

// redisStore opens a Redis store on cc, closed with the test.
func redisStore(t testing.TB, cc redisstore.ClientConfig) limiter.Store {
	t.Helper()
	client, err := cc.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	st, err := redisstore.New(client, redisstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	// Before the client (cleanups run last first): the store's senders give their connections
	// back, or closing the client under them logs inside a benchmark's output line.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := st.Close(ctx); err != nil {
			t.Errorf("close the store: %v", err)
		}
	})
	return st
}

// redisBackend starts one private redis-server for all the tests of a
// suite; each test gets a database of its own by flushing it first.
func redisBackend(t *testing.T) backend {
	srv := redistest.Single(t)
	return backend{name: "redis", open: func(t *testing.T) limiter.Store {
		if _, err := srv.Do("FLUSHALL"); err != nil {
			t.Fatal(err)
		}
		return redisStore(t, redisstore.ClientConfig{URL: srv.URL()})
	}}
}

// clusterBackend starts a private three-master Redis Cluster; each test
// starts from empty masters.
func clusterBackend(t *testing.T) backend {
	c := redistest.Cluster(t, 3)
	return backend{name: "cluster", open: func(t *testing.T) limiter.Store {
		for _, n := range c.Nodes {
			if _, err := n.Do("FLUSHALL"); err != nil {
				t.Fatal(err)
			}
		}
		return redisStore(t, redisstore.ClientConfig{ClusterAddrs: c.Addrs})
	}}
}

// harness is a Service on a real gRPC listener and a client of it built
// from go-control-plane's generated code.
type harness struct {
	svc    *rls.Service
	client rlsv3.RateLimitServiceClient
	conn   *grpc.ClientConn
	col    *collector.Collector
	addr   string
}

// writeDir writes the domain files (name → YAML) into a new directory.
func writeDir(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// start serves the domain files of dir on store, recording into a real
// collector whose labels are the rules' endpoints.
func start(t testing.TB, store limiter.Store, dir string, mod func(*rls.Config)) *harness {
	t.Helper()
	return startOpts(t, store, dir, mod)
}

// startOpts is start on a gRPC server of the options opts.
func startOpts(t testing.TB, store limiter.Store, dir string, mod func(*rls.Config), opts ...grpc.ServerOption) *harness {
	t.Helper()
	rules, err := rls.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var endpoints []string
	for _, l := range rules.Limits() {
		endpoints = append(endpoints, l.Endpoint)
	}
	col, err := collector.New(collector.Config{Endpoints: endpoints, Tiers: []string{"free", "pro"}, DefaultTier: "free"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := rls.Config{
		Engine: limiter.Config{Store: store}, Recorder: col, Costs: col, ResponseHeaders: true, Tiers: []string{"free", "pro"}, DefaultTier: "free",
		TierDescriptorKey: "plan",
	}
	if mod != nil {
		mod(&cfg)
	}
	svc, err := rls.New(cfg, rules)
	if err != nil {
		t.Fatal(err)
	}
	return serve(t, svc, col, opts...)
}

// serve puts svc on a gRPC server of the options opts.
func serve(t testing.TB, svc *rls.Service, col *collector.Collector, opts ...grpc.ServerOption) *harness {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs, _ := rls.NewServer(svc, nil, opts...)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = gs.Serve(ln)
	}()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		gs.Stop()
		<-done
	})
	return &harness{svc: svc, client: rlsv3.NewRateLimitServiceClient(conn), conn: conn, col: col, addr: ln.Addr().String()}
}

// desc builds a descriptor from key, value pairs.
func desc(kv ...string) *ratelimitv3.RateLimitDescriptor {
	d := &ratelimitv3.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

// withHits sets the descriptor's own hits_addend.
func withHits(d *ratelimitv3.RateLimitDescriptor, n uint64) *ratelimitv3.RateLimitDescriptor {
	d.HitsAddend = wrapperspb.UInt64(n)
	return d
}

// call sends one ShouldRateLimit and fails the test on a transport error.
func (h *harness) call(t testing.TB, domain string, hits uint32, ds ...*ratelimitv3.RateLimitDescriptor) *rlsv3.RateLimitResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := h.client.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: domain, Descriptors: ds, HitsAddend: hits})
	if err != nil {
		t.Fatalf("ShouldRateLimit: %v", err)
	}
	if len(resp.Statuses) != len(ds) {
		t.Fatalf("%d statuses for %d descriptors", len(resp.Statuses), len(ds))
	}
	return resp
}

// count reads rate_limit_requests_total for an endpoint, tier and status.
func (h *harness) count(t testing.TB, endpoint, tier, status string) float64 {
	t.Helper()
	mfs, err := h.col.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "rate_limit_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if labels(m)["endpoint"] == endpoint && labels(m)["plan_tier"] == tier && labels(m)["status"] == status {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// codes lists the codes of a response's statuses.
func codes(resp *rlsv3.RateLimitResponse) []rlsv3.RateLimitResponse_Code {
	out := make([]rlsv3.RateLimitResponse_Code, len(resp.Statuses))
	for i, s := range resp.Statuses {
		out[i] = s.Code
	}
	return out
}

// headers maps a response's response_headers_to_add, for Get.
func headers(resp *rlsv3.RateLimitResponse) http.Header {
	out := http.Header{}
	for _, h := range resp.ResponseHeadersToAdd {
		out.Add(h.Key, h.Value)
	}
	return out
}
