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
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/rl-exporter/rl-exporter/app"
	"github.com/rl-exporter/rl-exporter/config"
	"github.com/rl-exporter/rl-exporter/internal/eventually"
	"github.com/rl-exporter/rl-exporter/internal/redistest"
)

const grpcDomain = `domain: shop
descriptors:
  - key: user
    rate_limit: {unit: day, requests_per_unit: %d}
`

// buildGRPC builds serve from yaml (with the rls dir and the gRPC
// listener) with the collector wired in, and returns it with a client.
func buildGRPC(t *testing.T, extra string, rlsDir string, sections ...string) (*app.Built, *grpc.ClientConn) {
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
	return serveGRPC(t, cfg, nil)
}

// serveGRPC builds serve from cfg (reading reloads from sources, when not
// nil) with the collector wired in, serves it until the test ends, and
// returns it with a gRPC client of its listener.
func serveGRPC(t *testing.T, cfg *config.Config, sources *config.Sources) (*app.Built, *grpc.ClientConn) {
	t.Helper()
	tel, err := app.NewTelemetry(context.Background(), cfg, app.TelemetryInfo{TraceWriter: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	deps := tel.Deps(nil)
	deps.Sources = sources
	srv, err := app.Build(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	if err := tel.Register(srv.ConfigMetrics(), srv.RLSMetrics(), srv.QuotaMetrics()); err != nil {
		t.Fatal(err)
	}
	serve(t, srv)
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

func scrapeMain(t *testing.T, srv *app.Built) string {
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
	srv, err := app.Build(cfg, app.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	serve(t, srv)
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
	eventually.True(t, 10*time.Second, "condition", cond)
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

// buildGRPCFromFile writes yaml (which must set the gRPC listener) to a
// config file and builds serve from it as the binary does, watching the
// file for reloads, and returns it with a client and the file's path.
func buildGRPCFromFile(t *testing.T, yaml string) (*app.Built, *grpc.ClientConn, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rl.yaml")
	writeFile(t, path, yaml)
	sources := &config.Sources{File: path}
	cfg, err := sources.Load()
	if err != nil {
		t.Fatal(err)
	}
	srv, conn := serveGRPC(t, cfg, sources)
	return srv, conn, path
}

// askAs sends one ShouldRateLimit for user on the plan tier plan (as a
// second descriptor, which no rule matches) and returns the user's status.
func askAs(t *testing.T, conn *grpc.ClientConn, user, plan string) *rlsv3.RateLimitResponse_DescriptorStatus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := rlsv3.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{
		Domain: "shop",
		Descriptors: []*ratelimitv3.RateLimitDescriptor{
			{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "user", Value: user}}},
			{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "plan", Value: plan}}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return resp.Statuses[0]
}

// adminDo sends one admin API request with the read-write token and
// returns the status and body.
func adminDo(t *testing.T, srv *app.Built, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+srv.Addr("admin")+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+opsToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestLiveChangesThroughTheAdminAPIChangeGRPCDecisionsWithoutRestart runs
// serve on a real Redis with the admin API, and changes the descriptor
// rule shop.user (2 a day) as a live-limit class: a PUT for its free tier,
// a PATCH of it, a tier-wide PUT for pro, and a DELETE, each checked on
// what ShouldRateLimit answers next and on the limit /metrics shows.
func TestLiveChangesThroughTheAdminAPIChangeGRPCDecisionsWithoutRestart(t *testing.T) {
	rdb := redistest.Single(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "shop.yaml"), fmt.Sprintf(grpcDomain, 2))
	srv, conn, _ := buildGRPCFromFile(t, fmt.Sprintf(`
server: {listen: "127.0.0.1:0", grpc_listen: "127.0.0.1:0", admin_listen: "127.0.0.1:0"}
store: {type: redis, redis: {url: %q}}
admin: {tokens: "ops:read-write:%s"}
live: {refresh_interval: 10s}
rls: {config_dir: %q, tier_descriptor_key: plan}
tiers: {names: [free, pro], default: free}
`, rdb.URL(), opsToken, dir))

	for i, want := range []rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT} {
		if st := askAs(t, conn, "alice", "free"); st.Code != want || st.CurrentLimit.GetRequestsPerUnit() != 2 {
			t.Fatalf("call %d before any change: %v with limit %d, want %v with the file's 2", i+1, st.Code, st.CurrentLimit.GetRequestsPerUnit(), want)
		}
	}
	// Within a second: pub/sub brings the change, not the 10s refresh.
	applies := func(what string, cond func() bool) {
		t.Helper()
		limit := time.Second
		if raceEnabled {
			limit += 4 * time.Second
		}
		eventually.True(t, limit, what+": applied to ShouldRateLimit", cond)
	}

	if code, body := adminDo(t, srv, http.MethodPut, "/admin/v1/limits/shop.user/free", `{"max_requests": 5}`); code != http.StatusOK {
		t.Fatalf("PUT shop.user/free: %d %s", code, body)
	} else if !strings.Contains(body, `"effective": "5 per 24h0m0s (fixed_window)"`) {
		t.Errorf("PUT answer does not show the rule's new limit:\n%s", body)
	}
	var st *rlsv3.RateLimitResponse_DescriptorStatus
	applies("PUT shop.user/free 5", func() bool { st = askAs(t, conn, "alice", "free"); return st.CurrentLimit.GetRequestsPerUnit() == 5 })
	if st.Code != rlsv3.RateLimitResponse_OK || st.CurrentLimit.GetUnit() != rlsv3.RateLimitResponse_RateLimit_DAY {
		t.Errorf("alice under the raised limit: %v, unit %v; want OK per DAY", st.Code, st.CurrentLimit.GetUnit())
	}
	if st := askAs(t, conn, "bob", "pro"); st.CurrentLimit.GetRequestsPerUnit() != 2 {
		t.Errorf("bob on pro: limit %d, want the file's 2 (the change is free's)", st.CurrentLimit.GetRequestsPerUnit())
	}
	if m := scrapeMain(t, srv); !strings.Contains(m, `rate_limit_limit{algorithm="fixed_window",endpoint="shop.user",plan_tier="free"} 5`) ||
		!strings.Contains(m, `rate_limit_limit{algorithm="fixed_window",endpoint="shop.user",plan_tier="pro"} 2`) {
		t.Errorf("/metrics does not show the limits in force (free 5, pro 2):\n%s", grepLines(m, "rate_limit_limit{"))
	}

	if code, body := adminDo(t, srv, http.MethodPatch, "/admin/v1/limits/shop.user/free", `{"max_requests": 1, "window": "1h"}`); code != http.StatusOK {
		t.Fatalf("PATCH shop.user/free: %d %s", code, body)
	}
	applies("PATCH shop.user/free 1 per hour", func() bool {
		st = askAs(t, conn, "alice", "free")
		return st.CurrentLimit.GetRequestsPerUnit() == 1 && st.CurrentLimit.GetUnit() == rlsv3.RateLimitResponse_RateLimit_HOUR
	})
	askAs(t, conn, "carol", "free")
	if st := askAs(t, conn, "carol", "free"); st.Code != rlsv3.RateLimitResponse_OVER_LIMIT {
		t.Errorf("carol's 2nd call under 1 per hour: %v, want OVER_LIMIT", st.Code)
	}

	// A tier's hash applies to every class of the tier, descriptor rules included.
	if code, body := adminDo(t, srv, http.MethodPut, "/admin/v1/limits/pro", `{"max_requests": 7}`); code != http.StatusOK {
		t.Fatalf("PUT pro: %d %s", code, body)
	}
	applies("PUT pro 7", func() bool { return askAs(t, conn, "bob", "pro").CurrentLimit.GetRequestsPerUnit() == 7 })

	if code, body := adminDo(t, srv, http.MethodDelete, "/admin/v1/limits/shop.user/free", ""); code != http.StatusOK {
		t.Fatalf("DELETE shop.user/free: %d %s", code, body)
	}
	applies("DELETE shop.user/free", func() bool {
		st = askAs(t, conn, "dave", "free")
		return st.CurrentLimit.GetRequestsPerUnit() == 2 && st.CurrentLimit.GetUnit() == rlsv3.RateLimitResponse_RateLimit_DAY
	})
}

// TestALiveChangeInShadowCountsWhatItWouldRefuseOverGRPC puts a live change
// of 1 a day in shadow on the rule shop.user (2 a day): the file's limit
// still decides, and the second call, which the change would refuse, is
// answered OK and counted shadow_rejected.
func TestALiveChangeInShadowCountsWhatItWouldRefuseOverGRPC(t *testing.T) {
	rdb := redistest.Single(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "shop.yaml"), fmt.Sprintf(grpcDomain, 2))
	srv, conn, _ := buildGRPCFromFile(t, fmt.Sprintf(`
server: {listen: "127.0.0.1:0", grpc_listen: "127.0.0.1:0", admin_listen: "127.0.0.1:0"}
store: {type: redis, redis: {url: %q}}
admin: {tokens: "ops:read-write:%s"}
rls: {config_dir: %q}
tiers: {names: [free, pro], default: free}
`, rdb.URL(), opsToken, dir))
	if code, body := adminDo(t, srv, http.MethodPut, "/admin/v1/limits/shop.user/free", `{"max_requests": 1, "shadow": true}`); code != http.StatusOK {
		t.Fatalf("PUT: %d %s", code, body)
	}
	waitFor(t, func() bool {
		return strings.Contains(scrapeMain(t, srv), `rate_limit_limit{algorithm="fixed_window",endpoint="shop.user",plan_tier="free"} 2`)
	})
	// The overlay reaches the service before the gauge; one more call on a fresh user proves it.
	waitFor(t, func() bool {
		u := fmt.Sprint("probe", time.Now().UnixNano())
		shouldRateLimit(t, conn, u)
		shouldRateLimit(t, conn, u)
		return strings.Contains(scrapeMain(t, srv), `endpoint="shop.user",plan_tier="free",status="shadow_rejected"}`)
	})
	codes := []rlsv3.RateLimitResponse_Code{shouldRateLimit(t, conn, "erin").OverallCode, shouldRateLimit(t, conn, "erin").OverallCode, shouldRateLimit(t, conn, "erin").OverallCode}
	if want := []rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT}; fmt.Sprint(codes) != fmt.Sprint(want) {
		t.Errorf("erin's three calls: %v, want %v (the file's 2 a day still decides)", codes, want)
	}
}

// TestAReloadOfTheHeadersSectionAppliesToGRPCAnswers edits the config
// file's headers section while serve runs: the next answers carry the
// newly selected families, without a restart.
func TestAReloadOfTheHeadersSectionAppliesToGRPCAnswers(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "shop.yaml"), fmt.Sprintf(grpcDomain, 100))
	yaml := fmt.Sprintf(`
server: {listen: "127.0.0.1:0", grpc_listen: "127.0.0.1:0"}
rls: {config_dir: %q}
reload: {watch: true, interval: 100ms}
`, dir)
	srv, conn, path := buildGRPCFromFile(t, yaml)
	names := func() string {
		var out []string
		for _, h := range shouldRateLimit(t, conn, "frank").ResponseHeadersToAdd {
			out = append(out, h.Key)
		}
		return strings.Join(out, ",")
	}
	if got, want := names(), "X-Ratelimit-Limit,X-Ratelimit-Remaining,X-Ratelimit-Reset,Ratelimit-Policy,Ratelimit"; got != want {
		t.Fatalf("headers before the reload: %s, want %s", got, want)
	}
	writeFile(t, path, yaml+"headers: {x_ratelimit: false, legacy: true}\n")
	waitFor(t, func() bool { ok, _ := srv.ConfigMetrics().Reloads(); return ok >= 1 })
	if got, want := names(), "Ratelimit-Policy,Ratelimit,Ratelimit-Limit,Ratelimit-Remaining,Ratelimit-Reset"; got != want {
		t.Errorf("headers after the reload: %s, want %s", got, want)
	}
}

func TestServeBoundsGRPCRequestsAndConnectionsAsTheRLSSectionSays(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "shop.yaml"), fmt.Sprintf(grpcDomain, 2))
	cfg, err := config.Parse("rl.yaml", []byte(fmt.Sprintf(`
server: {listen: "127.0.0.1:0", grpc_listen: "127.0.0.1:0"}
rls: {config_dir: %q, max_descriptors: 2, max_connection_idle: 300ms}
`, dir)))
	if err != nil {
		t.Fatal(err)
	}
	srv, conn := serveGRPC(t, cfg, nil)
	d := &ratelimitv3.RateLimitDescriptor{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "user", Value: "alice"}}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = rlsv3.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{
		Domain: "shop", Descriptors: []*ratelimitv3.RateLimitDescriptor{d, d, d},
	})
	if st, _ := status.FromError(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "more than the 2 allowed (rls.max_descriptors)") {
		t.Errorf("3 descriptors under rls.max_descriptors 2: %v, want InvalidArgument naming the limit", err)
	}
	if want := `rate_limit_rls_invalid_requests_total{reason="too_many_descriptors"} 1`; !strings.Contains(scrapeMain(t, srv), want) {
		t.Errorf("/metrics lacks %s", want)
	}
	// The call above was the connection's last: it closes after rls.max_connection_idle.
	if !conn.WaitForStateChange(ctx, connectivity.Ready) {
		t.Error("the connection idle for 10s is still open, want it closed after rls.max_connection_idle 300ms")
	}
}

func TestAnEmptiedRLSDirectoryIsRefusedAndTheDomainsInForceKeepServing(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "shop.yaml")
	writeFile(t, file, fmt.Sprintf(grpcDomain, 2))
	srv, conn := buildGRPC(t, "", dir)
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { _, e := srv.ConfigMetrics().Reloads(); return e >= 1 })
	st := shouldRateLimit(t, conn, "bob").Statuses
	if len(st) != 1 || st[0].CurrentLimit.GetRequestsPerUnit() != 2 {
		t.Fatalf("statuses %v after the directory was emptied, want the old limit 2", st)
	}
	if ok, _ := srv.ConfigMetrics().Reloads(); ok != 0 {
		t.Errorf("%d successful reloads, want none", ok)
	}
}

func TestTheGRPCListenerRefusesMetadataOverMaxHeaderBytes(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "shop.yaml"), fmt.Sprintf(grpcDomain, 1000))
	_, conn := buildGRPC(t, "", dir)
	ask := func(pad int) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ctx = metadata.AppendToOutgoingContext(ctx, "x-pad", strings.Repeat("p", pad))
		_, err := rlsv3.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{
			Domain:      "shop",
			Descriptors: []*ratelimitv3.RateLimitDescriptor{{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "user", Value: "alice"}}}},
		})
		return err
	}
	if err := ask(1000); err != nil {
		t.Fatalf("1 KB of metadata: %v", err)
	}
	if err := ask(1 << 20); err == nil {
		t.Error("1 MB of metadata was answered, want it refused (server.max_header_bytes 64 KiB)")
	}
}
