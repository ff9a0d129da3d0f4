package server_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"

	"github.com/rl-exporter/rl-exporter/config"
	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/server"
)

const grpcDomain = `domain: shop
descriptors:
  - key: user
    rate_limit: {unit: day, requests_per_unit: %d}
`

// buildGRPC builds serve from yaml (with the rls dir and the gRPC
// listener) with the collector wired in, and returns it with a client.
func buildGRPC(t *testing.T, extra string, rlsDir string, sections ...string) (*server.Built, *grpc.ClientConn) {
	t.Helper()
	cfg, err := config.Parse("rl.yaml", []byte(fmt.Sprintf(`
server: {listen: "127.0.0.1:0", grpc_listen: "127.0.0.1:0"%s}
rls: {config_dir: %q}
reload: {watch: true, interval: 100ms}
tiers: {names: [free, pro], default: free}
%s
`, extra, rlsDir, strings.Join(sections, "\n"))))
	if err != nil {
		t.Fatal(err)
	}
	tel, err := server.NewTelemetry(context.Background(), cfg, server.TelemetryInfo{TraceWriter: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.Build(cfg, tel.Deps(nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := tel.Register(srv.ConfigMetrics()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	conn, err := grpc.NewClient(srv.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return srv, conn
}

func shouldRateLimit(t *testing.T, conn *grpc.ClientConn, user string) *rlsv3.RateLimitResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := rlsv3.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{
		Domain:      "shop",
		Descriptors: []*ratelimitv3.RateLimitDescriptor{{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "user", Value: user}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func scrapeMain(t *testing.T, srv *server.Built) string {
	t.Helper()
	resp, err := http.Get("http://" + srv.Addr("main") + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func TestServeAnswersEnvoyOnTheGRPCListenerAndCountsByDescriptorPath(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "shop.yaml"), fmt.Sprintf(grpcDomain, 2))
	srv, conn := buildGRPC(t, "", dir)

	for i, want := range []rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT} {
		if got := shouldRateLimit(t, conn, "alice").OverallCode; got != want {
			t.Fatalf("call %d: %v, want %v", i+1, got, want)
		}
	}
	metrics := scrapeMain(t, srv)
	for _, want := range []string{
		`rate_limit_requests_total{endpoint="shop.user",plan_tier="free",status="allowed"} 2`,
		`rate_limit_requests_total{endpoint="shop.user",plan_tier="free",status="rejected"} 1`,
		`rate_limit_limit{algorithm="fixed_window",endpoint="shop.user",plan_tier="free"} 2`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(metrics, "alice") {
		t.Error("/metrics shows a descriptor value")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	h, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: "envoy.service.ratelimit.v3.RateLimitService"})
	if err != nil || h.Status != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("health: %v, %v; want SERVING", h, err)
	}
	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	r, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range r.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	if !strings.Contains(strings.Join(names, " "), "envoy.service.ratelimit.v3.RateLimitService") {
		t.Errorf("reflection lists %v", names)
	}
}

func TestAnInvalidRLSDirectoryKeepsTheRulesInForceAndAValidOneReplacesThem(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "shop.yaml")
	writeFile(t, file, fmt.Sprintf(grpcDomain, 2))
	srv, conn := buildGRPC(t, "", dir)

	writeFile(t, file, "domain: shop\ndescriptors:\n  - key: user\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n")
	waitFor(t, func() bool { _, e := srv.ConfigMetrics().Reloads(); return e >= 1 })
	if got := shouldRateLimit(t, conn, "bob").Statuses[0].CurrentLimit.GetRequestsPerUnit(); got != 2 {
		t.Fatalf("limit %d after an invalid file, want the old 2", got)
	}
	writeFile(t, file, fmt.Sprintf(grpcDomain, 9))
	waitFor(t, func() bool {
		return shouldRateLimit(t, conn, "bob").Statuses[0].CurrentLimit.GetRequestsPerUnit() == 9
	})
}

func TestTheGRPCListenerRequiresAClientCertificateWhenAClientCAIsSet(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "shop.yaml"), fmt.Sprintf(grpcDomain, 2))
	pki := newTestPKI(t)
	cfg, err := config.Parse("rl.yaml", []byte(fmt.Sprintf(`
server:
  listen: "127.0.0.1:0"
  grpc_listen: "127.0.0.1:0"
  grpc_tls: {cert_file: %q, key_file: %q, client_ca_file: %q}
rls: {config_dir: %q}
`, pki.serverCert, pki.serverKey, pki.caFile, dir)))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.Build(cfg, server.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Shutdown() })
	dial := func(certs []tls.Certificate) error {
		conn, err := grpc.NewClient(srv.GRPCAddr(), grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
			RootCAs: pki.pool, Certificates: certs, ServerName: "localhost", MinVersion: tls.VersionTLS12,
		})))
		if err != nil {
			return err
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err = rlsv3.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{
			Domain: "shop", Descriptors: []*ratelimitv3.RateLimitDescriptor{{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "user", Value: "c"}}}},
		})
		return err
	}
	if err := dial(nil); err == nil {
		t.Error("a client without a certificate was served")
	}
	if err := dial([]tls.Certificate{pki.client}); err != nil {
		t.Errorf("a client with a certificate of the CA: %v", err)
	}
}

func TestConfigRefusesAGRPCListenerWithoutAnRLSDirectory(t *testing.T) {
	_, err := config.Parse("rl.yaml", []byte(`server: {listen: "127.0.0.1:0", grpc_listen: "127.0.0.1:0"}`))
	if err == nil || !strings.Contains(err.Error(), "rls.config_dir") {
		t.Fatalf("err %v, want rls.config_dir named", err)
	}
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// testPKI is a CA with a server certificate for localhost and a client
// certificate, written to files.
type testPKI struct {
	caFile, serverCert, serverKey string
	pool                          *x509.CertPool
	client                        tls.Certificate
}

func newTestPKI(t *testing.T) testPKI {
	t.Helper()
	dir := t.TempDir()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	issue := func(serial int64, usage x509.ExtKeyUsage) ([]byte, []byte) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "localhost"}, DNSNames: []string{"localhost"},
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			KeyUsage: x509.KeyUsageDigitalSignature, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kb, _ := x509.MarshalECPrivateKey(key)
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
	}
	p := testPKI{caFile: filepath.Join(dir, "ca.pem"), serverCert: filepath.Join(dir, "server.pem"), serverKey: filepath.Join(dir, "server-key.pem")}
	writeFile(t, p.caFile, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})))
	sc, sk := issue(2, x509.ExtKeyUsageServerAuth)
	writeFile(t, p.serverCert, string(sc))
	writeFile(t, p.serverKey, string(sk))
	cc, ck := issue(3, x509.ExtKeyUsageClientAuth)
	client, err := tls.X509KeyPair(cc, ck)
	if err != nil {
		t.Fatal(err)
	}
	p.client = client
	p.pool = x509.NewCertPool()
	p.pool.AddCert(ca)
	return p
}

func TestDetailedMetricDescriptorsGetLabelsOfTheirOwnOnMetrics(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "shop.yaml"), "domain: shop\ndescriptors:\n  - key: user\n    detailed_metric: true\n    rate_limit: {unit: day, requests_per_unit: 5}\n")
	srv, conn := buildGRPC(t, "", dir)
	shouldRateLimit(t, conn, "carol")
	waitFor(t, func() bool {
		shouldRateLimit(t, conn, "carol")
		return strings.Contains(scrapeMain(t, srv), `rate_limit_requests_total{endpoint="shop.user_carol",plan_tier="free",status="allowed"}`)
	})
}

func TestTheGRPCListenerAnswersPerFailPolicyWhenRedisIsDown(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "shop.yaml"), fmt.Sprintf(grpcDomain, 5))
	redis := redistest.Single(t)
	redis.Stop()
	for policy, want := range map[string]rlsv3.RateLimitResponse_Code{
		"open": rlsv3.RateLimitResponse_OK, "closed": rlsv3.RateLimitResponse_OVER_LIMIT,
	} {
		t.Run(policy, func(t *testing.T) {
			srv, conn := buildGRPC(t, "", dir, fmt.Sprintf("store: {type: redis, fail_policy: %s, redis: {url: %q}}", policy, redis.URL()))
			if got := shouldRateLimit(t, conn, "dave").OverallCode; got != want {
				t.Errorf("fail_policy %s with Redis down: %v, want %v", policy, got, want)
			}
			if m := scrapeMain(t, srv); !strings.Contains(m, `endpoint="shop.user",plan_tier="free",status="fail_`+policy+`"} 1`) {
				t.Errorf("/metrics does not count the decision as fail_%s", policy)
			}
		})
	}
}
