package server_test

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"golang.org/x/crypto/bcrypt"
	"google.golang.org/protobuf/proto"

	"github.com/rl-exporter/rl-exporter/collector"
	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/limiter"
)

// metricsConfig has two endpoints (GET /search and the catch-all "/") and
// two plan tiers read from X-Plan-Tier (trusted from this host, where the
// test plays the gateway), on three algorithms.
const metricsConfig = `
tiers: {names: [free, pro], default: free, header: X-Plan-Tier}
identity: {trusted_header_peers: [127.0.0.1]}
classes:
  default:
    limits:
      free: {algorithm: fixed_window, rate: 3, period: 1h}
      pro:  {algorithm: fixed_window, rate: 10, period: 1h}
  search:
    routes: ["GET /search"]
    limits:
      free: {algorithm: gcra, rate: 2, period: 1h, burst: 2}
      pro:  {algorithm: token_bucket, rate: 4, period: 1h}
`

// samples maps a series, written name{label="value",...} with the labels
// sorted, to its value; a histogram gives name_count and name_sum.
type samples map[string]float64

// series writes the key of a series from label name/value pairs.
func series(name string, labels ...string) string {
	pairs := make([]string, 0, len(labels)/2)
	for i := 0; i+1 < len(labels); i += 2 {
		pairs = append(pairs, fmt.Sprintf("%s=%q", labels[i], labels[i+1]))
	}
	sort.Strings(pairs)
	return name + "{" + strings.Join(pairs, ",") + "}"
}

func parseSamples(t *testing.T, body string) samples {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v\n%s", err, body)
	}
	out := samples{}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			var kv []string
			for _, l := range m.GetLabel() {
				kv = append(kv, l.GetName(), l.GetValue())
			}
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				out[series(name, kv...)] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[series(name, kv...)] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[series(name+"_count", kv...)] = float64(m.GetHistogram().GetSampleCount())
				out[series(name+"_sum", kv...)] = m.GetHistogram().GetSampleSum()
				for _, b := range m.GetHistogram().GetBucket() {
					le := strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64)
					out[series(name+"_bucket", append(kv, "le", le)...)] = float64(b.GetCumulativeCount())
				}
			}
		}
	}
	return out
}

// get returns a series' value, failing the test when the series is missing.
func (s samples) get(t *testing.T, key string) float64 {
	t.Helper()
	v, ok := s[key]
	if !ok {
		t.Fatalf("series %s is missing from /metrics", key)
	}
	return v
}

// sum adds the values of every series whose key starts with prefix.
func (s samples) sum(prefix string) float64 {
	var total float64
	for k, v := range s {
		if strings.HasPrefix(k, prefix) {
			total += v
		}
	}
	return total
}

// scrape GETs url and returns the body, failing unless the answer is 200.
func scrape(t *testing.T, url string, hdr map[string]string) string {
	t.Helper()
	resp := get(t, url, hdr)
	body := readBody(resp)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: status %d: %s", url, resp.StatusCode, body)
	}
	return body
}

var algorithmsOf = map[string]map[string]string{ // endpoint → tier → algorithm
	"/":           {"free": "fixed_window", "pro": "fixed_window"},
	"GET /search": {"free": "gcra", "pro": "token_bucket"},
}

func TestServeMetricsStartAtZeroAndCountEveryDecisionByEndpointAndTier(t *testing.T) {
	up := upstream(t)
	p := startServe(t, []string{"main"}, "--config", writeConfig(t, metricsConfig), "--upstream", up.URL)
	metrics := p.url("main", "/metrics")

	// Before any request: every series of every configured endpoint × tier
	// is there at zero, the latency histogram for every algorithm.
	first := parseSamples(t, scrape(t, metrics, nil))
	for ep, tiers := range algorithmsOf {
		for tier, alg := range tiers {
			for _, st := range limiter.AllStatuses() {
				if v := first.get(t, series("rate_limit_requests_total", "endpoint", ep, "plan_tier", tier, "status", string(st))); v != 0 {
					t.Errorf("requests_total %s %s %s = %v before any request", ep, tier, st, v)
				}
			}
			if v := first.get(t, series("rate_limit_near_limit_total", "endpoint", ep, "plan_tier", tier)); v != 0 {
				t.Errorf("near_limit_total %s %s = %v before any request", ep, tier, v)
			}
			want := map[string]float64{"gcra": 2, "token_bucket": 4}[alg]
			if want == 0 {
				want = map[string]float64{"free": 3, "pro": 10}[tier]
			}
			if v := first.get(t, series("rate_limit_limit", "algorithm", alg, "endpoint", ep, "plan_tier", tier)); v != want {
				t.Errorf("rate_limit_limit %s %s = %v, want the configured %v", ep, tier, v, want)
			}
		}
		for _, reason := range []string{"timeout", "error"} {
			first.get(t, series("rate_limit_fail_open_total", "endpoint", ep, "reason", reason))
			first.get(t, series("rate_limit_fail_closed_total", "endpoint", ep, "reason", reason))
		}
	}
	for _, alg := range limiter.AllAlgorithms() {
		if v := first.get(t, series("rate_limit_redis_duration_seconds_count", "operation", string(alg))); v != 0 {
			t.Errorf("redis_duration_seconds %s has %v observations before any request", alg, v)
		}
	}
	for _, kind := range []string{"timeout", "error"} {
		first.get(t, series("rate_limit_store_errors_total", "kind", kind, "store", "memory"))
	}
	if first.sum("rl_exporter_build_info{") != 1 {
		t.Errorf("rl_exporter_build_info is not a single series at 1")
	}

	// A little traffic: each endpoint × tier gets requests until some are
	// refused (the catch-all pro client stays under its limit).
	type group struct{ path, tier string }
	sends := map[group]int{{"/search", "free"}: 5, {"/search", "pro"}: 7, {"/anything", "free"}: 4, {"/anything", "pro"}: 2}
	endpointOf := map[string]string{"/search": "GET /search", "/anything": "/"}
	allowed, rejected := map[group]int{}, map[group]int{}
	for g, n := range sends {
		for i := 0; i < n; i++ {
			hdr := map[string]string{}
			if g.tier == "pro" {
				hdr["X-Plan-Tier"] = "pro"
			}
			switch code := get(t, p.url("main", g.path), hdr).StatusCode; code {
			case 200:
				allowed[g]++
			case 429:
				rejected[g]++
			default:
				t.Fatalf("%s %s: status %d", g.path, g.tier, code)
			}
		}
	}
	for g := range sends {
		if allowed[g] == 0 || (g.tier == "free" && rejected[g] == 0) {
			t.Fatalf("%v: %d allowed, %d rejected: the traffic does not exercise both outcomes", g, allowed[g], rejected[g])
		}
	}

	body := scrape(t, metrics, nil)
	after := parseSamples(t, body)
	perAlg := map[string]int{}
	total := 0
	for g, n := range sends {
		ep := endpointOf[g.path]
		for st, want := range map[limiter.Status]int{limiter.StatusAllowed: allowed[g], limiter.StatusRejected: rejected[g],
			limiter.StatusShadowRejected: 0, limiter.StatusFailOpen: 0, limiter.StatusFailClosed: 0} {
			if got := after.get(t, series("rate_limit_requests_total", "endpoint", ep, "plan_tier", g.tier, "status", string(st))); got != float64(want) {
				t.Errorf("rate_limit_requests_total{endpoint=%q,plan_tier=%q,status=%q} = %v, want %d", ep, g.tier, st, got, want)
			}
		}
		perAlg[algorithmsOf[ep][g.tier]] += n
		total += n
	}
	// Every decision went to the memory store: one observation each.
	for _, alg := range limiter.AllAlgorithms() {
		if got := after.get(t, series("rate_limit_redis_duration_seconds_count", "operation", string(alg))); got != float64(perAlg[string(alg)]) {
			t.Errorf("redis_duration_seconds{operation=%q} has %v observations, want one per decision: %d", alg, got, perAlg[string(alg)])
		}
	}
	if got := after.sum("rate_limit_requests_total{"); got != float64(total) {
		t.Errorf("requests_total adds up to %v, want the %d requests sent", got, total)
	}

	// The real scrape passes promtool's lint without a word.
	cmd := exec.Command("promtool", "check", "metrics")
	cmd.Stdin = strings.NewReader(body)
	out, err := cmd.CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}

	// Tracing is off: OpenMetrics is served, without exemplars.
	om := scrape(t, metrics, map[string]string{"Accept": "application/openmetrics-text; version=1.0.0"})
	if !strings.HasSuffix(om, "# EOF\n") || strings.Contains(om, "trace_id") {
		t.Errorf("OpenMetrics scrape without tracing: want # EOF and no exemplar")
	}
}

func TestFailOpenCountsExactlyTheRequestsLetThroughWhileRedisIsDown(t *testing.T) {
	rdb := redistest.Single(t)
	up := upstream(t)
	cfg := writeConfig(t, `
store: {timeout: 250ms, fail_policy: open}
classes:
  default:
    limits:
      default: {algorithm: sliding_window, rate: 1000, period: 1m}
`)
	p := startServe(t, []string{"main"}, "--config", cfg, "--upstream", up.URL, "--redis-url", rdb.URL())
	metrics := p.url("main", "/metrics")
	requests := func(status limiter.Status) string {
		return series("rate_limit_requests_total", "endpoint", "/", "plan_tier", "default", "status", string(status))
	}
	const up1 = 5
	for i := 0; i < up1; i++ {
		resp := get(t, p.url("main", "/x"), nil)
		if resp.StatusCode != 200 || resp.Header.Get("X-RateLimit-Remaining") == "" {
			t.Fatalf("request %d with Redis up: status %d, X-RateLimit-Remaining %q", i, resp.StatusCode, resp.Header.Get("X-RateLimit-Remaining"))
		}
	}
	before := parseSamples(t, scrape(t, metrics, nil))
	if got := before.get(t, requests(limiter.StatusAllowed)); got != up1 {
		t.Fatalf("allowed = %v with Redis up, want %d", got, up1)
	}

	rdb.Stop()
	const down = 7
	for i := 0; i < down; i++ {
		resp := get(t, p.url("main", "/x"), nil)
		if resp.StatusCode != 200 || resp.Header.Get("X-Upstream") != "yes" {
			t.Fatalf("request %d with Redis down: status %d, want it let through to the upstream", i, resp.StatusCode)
		}
	}
	after := parseSamples(t, scrape(t, metrics, nil))
	failOpen := after.sum(`rate_limit_fail_open_total{endpoint="/"`) - before.sum(`rate_limit_fail_open_total{endpoint="/"`)
	if failOpen != down {
		t.Errorf("rate_limit_fail_open_total rose by %v, want exactly the %d requests let through", failOpen, down)
	}
	if got := after.get(t, requests(limiter.StatusFailOpen)); got != down {
		t.Errorf(`requests_total{status="fail_open"} = %v, want %d`, got, down)
	}
	if got := after.get(t, requests(limiter.StatusAllowed)); got != up1 {
		t.Errorf(`requests_total{status="allowed"} = %v after the outage, want still %d`, got, up1)
	}
	// The breaker (on by default) lets at least five failures reach the
	// store (more when they take less than 100ms), then the decisions skip
	// it: each decision is one or the other.
	reached := after.sum(`rate_limit_store_errors_total{kind="error"`)
	skipped := after.sum(`rate_limit_fail_open_total{endpoint="/",reason="circuit_open"`)
	if reached < 5 || reached+skipped != down {
		t.Errorf(`rate_limit_store_errors_total{kind="error"} = %v and fail_open_total{reason="circuit_open"} = %v: want at least 5 refused calls counted as errors, and the two to add up to the %d decisions`, reached, skipped, down)
	}
	if got := after.sum(`rate_limit_store_errors_total{kind="timeout"`); got != 0 {
		t.Errorf(`rate_limit_store_errors_total{kind="timeout"} = %v: a refused connection is not a timeout`, got)
	}
	// Failed calls went to the store too and are observed at their elapsed time.
	if got := after.get(t, series("rate_limit_redis_duration_seconds_count", "operation", "sliding_window")); got != up1+reached {
		t.Errorf("redis_duration_seconds has %v observations, want one per store call: %v", got, up1+reached)
	}
}

// otlpReceiver is an in-process OTLP/HTTP trace receiver.
type otlpReceiver struct {
	*httptest.Server
	mu    sync.Mutex
	spans []*tracepb.Span
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	r := &otlpReceiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		var ex collectortrace.ExportTraceServiceRequest
		if req.URL.Path != "/v1/traces" || proto.Unmarshal(body, &ex) != nil {
			http.Error(w, "not an OTLP trace export", http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		for _, rs := range ex.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				r.spans = append(r.spans, ss.GetSpans()...)
			}
		}
		r.mu.Unlock()
		out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *otlpReceiver) got() []*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*tracepb.Span(nil), r.spans...)
}

var exemplarTraceID = regexp.MustCompile(`(?m)^rate_limit_redis_duration_seconds_bucket\{.*\} \d+ # \{trace_id="([0-9a-f]{32})"\}`)

func TestWithTracingOnTheLatencyCarriesTraceIDExemplarsOfExportedDecisionSpans(t *testing.T) {
	rdb := redistest.Single(t)
	recv := newOTLPReceiver(t)
	cfg := writeConfig(t, fmt.Sprintf(`
tracing: {exporter: otlp-http, endpoint: %q, sample_ratio: 1}
classes:
  default:
    limits:
      default: {algorithm: gcra, rate: 100, period: 1m}
`, recv.URL+"/v1/traces"))
	up := upstream(t)
	p := startServe(t, []string{"main"}, "--config", cfg, "--upstream", up.URL, "--redis-url", rdb.URL())
	for i := 0; i < 3; i++ {
		if code := get(t, p.url("main", "/x"), nil).StatusCode; code != 200 {
			t.Fatalf("request %d: status %d", i, code)
		}
	}
	om := scrape(t, p.url("main", "/metrics"), map[string]string{"Accept": "application/openmetrics-text; version=1.0.0"})
	matches := exemplarTraceID.FindAllStringSubmatch(om, -1)
	if len(matches) == 0 {
		t.Fatalf("no trace_id exemplar on rate_limit_redis_duration_seconds in the OpenMetrics scrape:\n%s", grepLines(om, "rate_limit_redis_duration_seconds_bucket"))
	}
	// A graceful stop flushes the spans.
	if err := p.stop(t); err != nil {
		t.Fatalf("serve exited with %v", err)
	}
	decisions := map[string]string{} // span id → trace id
	for _, s := range recv.got() {
		if s.GetName() == "rate_limit.decision" {
			decisions[hex.EncodeToString(s.GetSpanId())] = hex.EncodeToString(s.GetTraceId())
		}
	}
	if len(decisions) != 3 {
		t.Fatalf("%d decision spans exported, want one per request: 3", len(decisions))
	}
	for _, m := range matches {
		found := false
		for _, tid := range decisions {
			found = found || tid == m[1]
		}
		if !found {
			t.Errorf("exemplar trace_id %s is not the trace of an exported decision span", m[1])
		}
	}
	redisChildren := 0
	for _, s := range recv.got() {
		if tid, ok := decisions[hex.EncodeToString(s.GetParentSpanId())]; ok && tid == hex.EncodeToString(s.GetTraceId()) {
			redisChildren++
			for _, a := range s.GetAttributes() {
				if strings.Contains(a.GetValue().GetStringValue(), "127.0.0.1") && strings.Contains(a.GetKey(), "statement") {
					t.Errorf("a Redis span records the statement (users' keys): %v", a)
				}
			}
		}
	}
	if redisChildren < 3 {
		t.Errorf("%d Redis round-trip spans under the decision spans, want at least one per decision", redisChildren)
	}
}

func grepLines(s, substr string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func TestTopLimitedKeysAreServedOnTheAdminListenerOnly(t *testing.T) {
	cfg := writeConfig(t, "classes: {default: {limits: {default: {algorithm: fixed_window, rate: 5, period: 1h}}}}\n")
	p := startServeEnv(t, tokensEnv, []string{"main", "metrics", "admin"}, "--config", cfg,
		"--metrics-listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0")
	// Asked on the public listener (while the client is still allowed: the
	// path is rate-limited like any other), it is not served.
	for _, l := range []string{"main", "metrics"} {
		resp := get(t, p.url(l, "/debug/top-limited"), nil)
		if body := readBody(resp); resp.StatusCode != 404 || strings.Contains(body, "127.0.0.1") {
			t.Errorf("%s listener /debug/top-limited: status %d body %q, want 404 without any key", l, resp.StatusCode, body)
		}
	}
	rejected := 0
	for i := 0; i < 8; i++ {
		if get(t, p.url("main", "/orders"), nil).StatusCode == 429 {
			rejected++
		}
	}
	if rejected != 4 {
		t.Fatalf("%d requests rejected, want 4 of 9 over a limit of 5", rejected)
	}
	resp := get(t, p.url("admin", "/debug/top-limited"), map[string]string{"Authorization": "Bearer " + grafanaToken})
	var top collector.TopLimited
	if err := json.Unmarshal([]byte(readBody(resp)), &top); resp.StatusCode != 200 || err != nil {
		t.Fatalf("admin /debug/top-limited: status %d, %v", resp.StatusCode, err)
	}
	if len(top.Current.Keys) != 1 || !strings.HasSuffix(top.Current.Keys[0].Key, "ip:127.0.0.1") || top.Current.Keys[0].Count != uint64(rejected) {
		t.Errorf("top-limited keys %+v, want the one client with its %d rejections", top.Current.Keys, rejected)
	}
}

func TestMetricsBehindAWebConfigAnswer401WithoutCredentials(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, fivePerMinute+"metrics: {web_config_file: web.yml}\n")
	web := filepath.Join(filepath.Dir(cfg), "web.yml")
	if err := os.WriteFile(web, []byte("basic_auth_users:\n  prometheus: "+string(hash)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	t.Run("the metrics listener asks for basic auth", func(t *testing.T) {
		p := startServe(t, []string{"main", "metrics"}, "--config", cfg, "--metrics-listen", "127.0.0.1:0")
		url := p.url("metrics", "/metrics")
		if resp := get(t, url, nil); resp.StatusCode != 401 {
			t.Errorf("/metrics without credentials: status %d, want 401", resp.StatusCode)
		}
		do := func(user, pass string) *http.Response {
			req, _ := http.NewRequest("GET", url, nil)
			req.SetBasicAuth(user, pass)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { resp.Body.Close() })
			return resp
		}
		if resp := do("prometheus", "wrong"); resp.StatusCode != 401 {
			t.Errorf("/metrics with a wrong password: status %d, want 401", resp.StatusCode)
		}
		resp := do("prometheus", "s3cret")
		if b, _ := io.ReadAll(resp.Body); resp.StatusCode != 200 || !strings.Contains(string(b), "rate_limit_requests_total") {
			t.Errorf("/metrics with the credentials: status %d, want 200 with the metrics", resp.StatusCode)
		}
	})
	t.Run("without a metrics listener serve refuses to start", func(t *testing.T) {
		out, err := exec.Command(binary, "serve", "--config", cfg, "--listen", "127.0.0.1:0").CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
			t.Fatalf("exit %v, want status 1; output %s", err, out)
		}
		for _, want := range []string{cfg, "metrics.web_config_file", "server.metrics_listen"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("output %q does not mention %q", out, want)
			}
		}
	})
	t.Run("a broken web config stops serve at start-up", func(t *testing.T) {
		if err := os.WriteFile(web, []byte("basic_auth_users: [not, a, map]\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(binary, "serve", "--config", cfg, "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0").CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), web) {
			t.Errorf("exit %v, want status 1 naming %s; output %s", err, web, out)
		}
	})
}

// A tier of several limits exports each limit's quota, and a refused request counts once under
// each limit that refused it; a tier of one limit counts under its class's name.
func TestServeMetricsCountRefusalsByTheLimitsThatRefused(t *testing.T) {
	up := upstream(t)
	cfg := `
tiers: {names: [free, pro], default: free, header: X-Plan-Tier}
identity: {trusted_header_peers: [127.0.0.1]}
classes:
  default:
    limits:
      free: {algorithm: fixed_window, rate: 1, period: 1h}
      pro:
        - {name: hourly, algorithm: fixed_window, rate: 2, period: 1h}
        - {name: daily, algorithm: fixed_window, rate: 2, period: 24h}
`
	p := startServe(t, []string{"main"}, "--config", writeConfig(t, cfg), "--upstream", up.URL)
	metrics := p.url("main", "/metrics")
	first := parseSamples(t, scrape(t, metrics, nil))
	for lim, q := range map[[2]string]float64{{"pro", "hourly"}: 2, {"pro", "daily"}: 2, {"free", "default"}: 1} {
		if v := first.get(t, series("rate_limit_quota", "endpoint", "/", "limit", lim[1], "plan_tier", lim[0])); v != q {
			t.Errorf("rate_limit_quota of %v = %v, want %v", lim, v, q)
		}
		if v := first.get(t, series("rate_limit_refusals_total", "endpoint", "/", "limit", lim[1], "plan_tier", lim[0])); v != 0 {
			t.Errorf("rate_limit_refusals_total of %v = %v before any request", lim, v)
		}
	}
	pro := map[string]string{"X-Plan-Tier": "pro"}
	for i, want := range []int{200, 200, 429, 429} { // both refuse the third and the fourth
		if code := get(t, p.url("main", "/x"), pro).StatusCode; code != want {
			t.Fatalf("pro request %d: %d, want %d", i+1, code, want)
		}
	}
	for i, want := range []int{200, 429} {
		if code := get(t, p.url("main", "/x"), nil).StatusCode; code != want {
			t.Fatalf("free request %d: %d, want %d", i+1, code, want)
		}
	}
	body := scrape(t, metrics, nil)
	after := parseSamples(t, body)
	for lim, n := range map[[2]string]float64{{"pro", "hourly"}: 2, {"pro", "daily"}: 2, {"free", "default"}: 1} {
		if v := after.get(t, series("rate_limit_refusals_total", "endpoint", "/", "limit", lim[1], "plan_tier", lim[0])); v != n {
			t.Errorf("rate_limit_refusals_total of %v = %v, want %v", lim, v, n)
		}
	}
	if v := after.get(t, series("rate_limit_requests_total", "endpoint", "/", "plan_tier", "pro", "status", "rejected")); v != 2 {
		t.Errorf("pro rejections %v, want 2: one per request however many limits refused", v)
	}
	cmd := exec.Command("promtool", "check", "metrics")
	cmd.Stdin = strings.NewReader(body)
	if out, err := cmd.CombinedOutput(); err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}
