package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/alertsink"
	"github.com/rl-exporter/rl-exporter/dashboards"
	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/internal/testbin"
	"github.com/rl-exporter/rl-exporter/rlqs/filtersim"
	"github.com/rl-exporter/rl-exporter/slo"
	"github.com/rl-exporter/rl-exporter/traffic"
)

// binary is rl-exporter, built once by TestMain.
var binary string

// TestMain builds rl-exporter, runs the tests and fails the run when a
// process a test started (a gateway's worker, say) outlived it.
func TestMain(m *testing.M) {
	remove, err := testbin.Build("../cmd/rl-exporter", &binary)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if left := survivors(); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: processes started by the tests outlived them: %s\n", strings.Join(left, ", "))
		code = 1
	}
	remove()
	os.Exit(code)
}

// groups are the process groups of the programs the tests started, by the
// name start gave them.
var groups struct {
	sync.Mutex
	started map[int]string
}

// survivors lists the processes still running in the groups of the
// programs the tests started, killing them.
func survivors() []string {
	groups.Lock()
	defer groups.Unlock()
	var left []string
	for pgid, name := range groups.started {
		for _, p := range groupMembers(pgid) {
			left = append(left, p+" of "+name)
		}
		killGroup(pgid)
	}
	return left
}

// The endpoint and plan tiers the traffic uses (see serveConfig).
const (
	abusedEndpoint = "GET /api/v1/orders/{id}"
	abusedPath     = "GET /api/v1/orders/42"
	// costPath is charged the X-Usage-Tokens its answer carries (usageTokens
	// against an estimate of 100); leasePath holds a concurrency lease while
	// it runs.
	costPath    = "POST /api/v1/completions"
	leasePath   = "POST /api/v1/reports"
	usageTokens = "60"
)

// serveConfig: free clients get a small token bucket on the orders
// endpoint, pro clients a large one; Redis decides, and fails open. The
// traffic generator plays the gateway, so X-User-ID and X-Plan-Tier are
// trusted from this host. The completions endpoint is charged what the
// upstream says each answer cost, the reports endpoint caps requests in
// flight, and server.overload guards the upstream, so that every row of
// the Overview dashboard has series: the lease and overload series exist
// at zero from start-up, the cost series from the first reservation.
const serveConfig = `
server:
  shutdown_timeout: 2s
  overload: {enabled: true}
log: {level: warn}
store:
  type: redis
  timeout: 100ms
  fail_policy: open
  redis: {dial_timeout: 200ms}
tiers: {names: [free, pro], default: free, header: X-Plan-Tier}
identity: {user_header: X-User-ID, trusted_header_peers: [127.0.0.1]}
classes:
  default:
    limits:
      free: {algorithm: fixed_window, rate: 600, period: 1m}
  public:
    routes: ["GET /api/v1/orders/{id}"]
    limits:
      free: {algorithm: token_bucket, rate: 5, period: 1s, burst: 5}
      pro:  {algorithm: gcra, rate: 200, period: 1s, burst: 200}
  completions:
    routes: ["POST /api/v1/completions"]
    cost_from: {header: X-Usage-Tokens}
    estimate: 100
    limits:
      free: {algorithm: fixed_window, rate: 10000, period: 1m}
      pro: {algorithm: fixed_window, rate: 1000000, period: 1m}
  reports:
    routes: ["POST /api/v1/reports"]
    limits:
      free: {algorithm: concurrency, limit: 1, lease_ttl: 2s}
      pro: {algorithm: concurrency, limit: 5, lease_ttl: 2s}
`

// upstream is the API behind serve: it answers every request with its
// method and path, and what the request cost in X-Usage-Tokens, as an LLM
// API reports its tokens.
func upstream() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Usage-Tokens", usageTokens)
		_ = json.NewEncoder(w).Encode(map[string]string{"method": r.Method, "path": r.URL.Path})
	})
}

// spec is the SLO spec of the test: the production thresholds (5 % of
// 429s, more than 10 fail-opens within the window) with windows, for:
// durations and Alertmanager timings shortened through the spec, so the
// real chain runs in a couple of minutes. %s is the sink's URL.
const spec = `
job: rl-exporter
rejection_ratio:
  threshold_percent: 5
  min_requests_per_second: 1
  window: 10s
  for: 5s
store_latency: {window: 10s, for: 30s}
fail_open:
  threshold: 10
  window: 10s
  for: 0s
metrics_absent: {for: 1m}
availability: {enabled: false}
routing:
  group_wait: 1s
  group_interval: 2s
  repeat_interval: 1h
  page: {webhook: {url: "%[1]s"}}
  ticket: {webhook: {url: "%[1]s"}}
`

// quotaDomain is the rls domain file the quota service (rlqs) divides: the chat bucket at 100
// requests a second.
const quotaDomain = `
domain: chat
descriptors:
  - key: name
    value: chat
    rate_limit: {unit: second, requests_per_unit: 100}
`

// prometheusConfig scrapes serve every second and evaluates the generated
// rules every second.
const prometheusConfig = `
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [%q]
alerting:
  alertmanagers:
    - static_configs: [{targets: [%q]}]
scrape_configs:
  - job_name: rl-exporter
    static_configs: [{targets: [%q]}]
`

// TestAlertsReachOnCall runs the real chain: traffic through rl-exporter
// serve on a private Redis, scraped by Prometheus 2.42 evaluating the rules
// `rl-exporter rules` generates, Alertmanager 0.25 routing with the
// generated configuration to a webhook sink — and checks what on-call
// receives.
func TestAlertsReachOnCall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 170*time.Second)
	defer cancel()
	dir := t.TempDir()
	started := time.Now()

	sink := alertsink.New(alertsink.Config{})
	sinkSrv := httptest.NewServer(sink)
	t.Cleanup(sinkSrv.Close)

	// The rules and the Alertmanager config, generated by the command
	// from the spec.
	specPath := filepath.Join(dir, "slo.yaml")
	writeFile(t, specPath, fmt.Sprintf(spec, sinkSrv.URL+"/alerts"))
	gen := filepath.Join(dir, "generated")
	if out, err := exec.Command(binary, "rules", "--spec", specPath, "--out", gen).CombinedOutput(); err != nil {
		t.Fatalf("rl-exporter rules: %v\n%s", err, out)
	}
	rules := filepath.Join(gen, filepath.FromSlash(slo.RulesPath))
	amConfig := filepath.Join(gen, filepath.FromSlash(slo.AlertmanagerPath))

	redis := redistest.Single(t)
	upstreamSrv := httptest.NewServer(upstream())
	t.Cleanup(upstreamSrv.Close)
	serveAddr, grpcAddr := freeAddr(t), freeAddr(t)
	servePath, rlsDir := filepath.Join(dir, "serve.yaml"), filepath.Join(dir, "rls")
	if err := os.Mkdir(rlsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(rlsDir, "chat.yaml"), quotaDomain)
	writeFile(t, servePath, serveConfig+fmt.Sprintf("rls: {config_dir: %q}\nrlqs: {enabled: true, interval: 1s}\n", rlsDir))
	start(t, dir, "serve", binary, "serve", "--config", servePath, "--listen", serveAddr, "--grpc-listen", grpcAddr,
		"--redis-url", redis.URL(), "--upstream", upstreamSrv.URL)
	waitHTTP(ctx, t, "http://"+serveAddr+"/readyz")
	// An Envoy's quota filter on the chat bucket, reporting every second, so that the quota
	// service's row has series.
	envoy := filtersim.Start(filtersim.Config{Addrs: []string{grpcAddr}, Domain: "chat", ReportInterval: time.Second})
	t.Cleanup(envoy.Close)
	go func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				envoy.Request(map[string]string{"name": "chat"})
			}
		}
	}()

	amAddr := freeAddr(t)
	start(t, dir, "alertmanager", tool(t, "prometheus-alertmanager", "alertmanager"),
		"--config.file="+amConfig, "--storage.path="+filepath.Join(dir, "alertmanager"),
		"--web.listen-address="+amAddr, "--cluster.listen-address=", "--log.level=warn")
	waitHTTP(ctx, t, "http://"+amAddr+"/-/ready")

	promAddr := freeAddr(t)
	promConfig := filepath.Join(dir, "prometheus.yml")
	writeFile(t, promConfig, fmt.Sprintf(prometheusConfig, rules, amAddr, serveAddr))
	// Without --enable-feature=native-histograms: Prometheus 2.42 would
	// otherwise keep only the native histogram and the rules read the
	// classic buckets.
	start(t, dir, "prometheus", tool(t, "prometheus"),
		"--config.file="+promConfig, "--storage.tsdb.path="+filepath.Join(dir, "prometheus"),
		"--web.listen-address="+promAddr, "--rules.alert.resend-delay=1s", "--log.level=warn")
	waitHTTP(ctx, t, "http://"+promAddr+"/-/ready")
	waitQuery(ctx, t, promAddr, `up{job="rl-exporter"} == 1`)
	t.Logf("stack up after %s", time.Since(started).Round(time.Second))

	// Well-behaved pro clients on the orders endpoint throughout; they are
	// far under their limit and never alert.
	normal := runTraffic(ctx, t, traffic.Config{
		Targets: []string{"http://" + serveAddr}, Normal: 3, NormalRate: 5, NoAbusive: true,
		NormalPaths: []string{abusedPath}, Tiers: []string{"pro"},
	})
	// A pro client on the completions and reports endpoints, for the cost
	// and concurrency rows of the dashboard; stopped before Redis goes down.
	costAndLeases := runTraffic(ctx, t, traffic.Config{
		Targets: []string{"http://" + serveAddr}, Normal: 1, NormalRate: 10, NoAbusive: true,
		NormalPaths: []string{costPath, leasePath}, Tiers: []string{"pro"},
	})

	t.Run("429s above 5% page with the endpoint and plan tier, then resolve", func(t *testing.T) {
		// One abusive free client: 40 requests per second against a
		// bucket refilled at 5 per second, so most are rejected.
		abusive := runTraffic(ctx, t, traffic.Config{
			Targets: []string{"http://" + serveAddr}, Normal: 1, NormalRate: 40, NoAbusive: true,
			NormalPaths: []string{abusedPath}, Tiers: []string{"free"},
		})
		labels := map[string]string{"endpoint": abusedEndpoint, "plan_tier": "free", "severity": "page"}
		fired := waitAlert(ctx, t, sink, slo.AlertRejectionRatioHigh, "firing", labels, 60*time.Second)
		if fired.Annotations["runbook_url"] == "" || !strings.Contains(fired.Annotations["description"], abusedEndpoint) {
			t.Errorf("annotations %v lack the runbook or the endpoint", fired.Annotations)
		}
		snap := abusive.stop()
		if snap.ByStatus[http.StatusTooManyRequests]*100 <= 5*snap.Sent {
			t.Fatalf("the abusive client saw %s: not more than 5%% rejections, the alert should not have fired", snap)
		}
		t.Logf("abusive client: %s; alert fired after %s", snap, time.Since(started).Round(time.Second))

		// Normal traffic only: the ratio falls to 0 within its window.
		waitAlert(ctx, t, sink, slo.AlertRejectionRatioHigh, "resolved", labels, 60*time.Second)
		t.Logf("resolved after %s", time.Since(started).Round(time.Second))
		for _, n := range sink.Notifications() {
			for _, a := range n.Alerts {
				if a.Labels["alertname"] == slo.AlertRejectionRatioHigh && a.Labels["plan_tier"] != "free" {
					t.Errorf("pro clients far under their limit alerted: %v", a.Labels)
				}
			}
		}
	})

	t.Run("every query of the generated Overview dashboard returns data", func(t *testing.T) {
		board := filepath.Join(gen, filepath.FromSlash(dashboards.OverviewPath))
		queries := dashboardQueries(t, board)
		if len(queries) < 10 {
			t.Fatalf("only %d queries in %s", len(queries), board)
		}
		// As Grafana sends them with every variable at "All".
		vars := strings.NewReplacer("$__rate_interval", "10s", "$endpoint", ".*", "$plan_tier", ".*", "$job", ".*", "$instance", ".*")
		for title, exprs := range queries {
			for _, e := range exprs {
				n, err := querySeries(ctx, promAddr, vars.Replace(e))
				if err != nil || n == 0 {
					t.Errorf("panel %q: %s returned %d series (%v)", title, e, n, err)
				}
			}
		}
		if snap := costAndLeases.stop(); snap.ByStatus[http.StatusOK] == 0 || snap.ByStatus[http.StatusOK] != snap.Sent {
			t.Errorf("the completions and reports client saw %s: all its requests should have reached the upstream", snap)
		}
	})

	t.Run("Redis down under fail-open load pages RateLimitFailOpen", func(t *testing.T) {
		redis.Stop()
		defer redis.Start()
		fired := waitAlert(ctx, t, sink, slo.AlertFailOpen, "firing", map[string]string{"severity": "page", "job": "rl-exporter"}, 45*time.Second)
		if fired.Annotations["summary"] == "" || fired.Annotations["runbook_url"] == "" {
			t.Errorf("annotations %v lack a summary or runbook", fired.Annotations)
		}
		snap := normal.stop()
		if snap.ByStatus[http.StatusOK] == 0 || snap.ByStatus[http.StatusServiceUnavailable] != 0 {
			t.Errorf("fail open: clients should get through while Redis is down, saw %s", snap)
		}
		t.Logf("fail-open page after %s", time.Since(started).Round(time.Second))
	})
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// tool finds one of the names on PATH or fails saying what to install.
func tool(t *testing.T, names ...string) string {
	t.Helper()
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	t.Fatalf("%s not found: install the Debian packages prometheus and prometheus-alertmanager (`make deps`)", strings.Join(names, " or "))
	return ""
}

// freeAddr asks the kernel for a free port on 127.0.0.1.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// start runs a program until the test ends, its output in dir/<name>.log,
// shown when the test fails, and returns its process group.
func start(t *testing.T, dir, name, bin string, args ...string) int {
	t.Helper()
	return startEnv(t, dir, name, nil, bin, args...)
}

// startEnv is start with env added to the test's environment. The program
// leads a process group of its own, stopped whole when the test ends, so
// that nothing it started (nginx's workers) outlives the test.
func startEnv(t *testing.T, dir, name string, env []string, bin string, args ...string) int {
	t.Helper()
	logPath := filepath.Join(dir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	pgid := cmd.Process.Pid
	groups.Lock()
	if groups.started == nil {
		groups.started = map[int]string{}
	}
	groups.started[pgid] = t.Name() + "'s " + name
	groups.Unlock()
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		stopGroup(cmd.Process)
		<-exited
		logFile.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			if len(b) > 4000 {
				b = b[len(b)-4000:]
			}
			t.Logf("%s log (%s):\n%s", name, strings.Join(args, " "), b)
		}
	})
	return pgid
}

// waitHTTP waits until url answers 200.
func waitHTTP(ctx context.Context, t *testing.T, url string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s not ready: %v", url, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitQuery waits until a PromQL query returns at least one sample.
func waitQuery(ctx context.Context, t *testing.T, promAddr, query string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	u := "http://" + promAddr + "/api/v1/query?query=" + url.QueryEscape(query)
	for {
		var body struct {
			Data struct {
				Result []json.RawMessage `json:"result"`
			} `json:"data"`
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			err = json.NewDecoder(resp.Body).Decode(&body)
			resp.Body.Close()
			if err == nil && len(body.Data.Result) > 0 {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("Prometheus never answered %s: %v", query, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// waitAlert waits for the sink to receive an alert with that name, status
// and labels.
func waitAlert(ctx context.Context, t *testing.T, sink *alertsink.Sink, name, status string, labels map[string]string, within time.Duration) alertsink.Alert {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	_, a, err := sink.Wait(ctx, alertsink.AlertMatch(name, status, labels))
	if err != nil {
		var got []string
		for _, n := range sink.Notifications() {
			for _, a := range n.Alerts {
				got = append(got, fmt.Sprintf("%s %s %v", a.Status, a.Labels["alertname"], a.Labels))
			}
		}
		t.Fatalf("no %s %s %v within %s; the sink received: %v", status, name, labels, within, got)
	}
	return a
}

// load is traffic running in the background.
type load struct {
	cancel context.CancelFunc
	done   chan struct{}
	stats  *traffic.Stats
	once   sync.Once
}

func runTraffic(ctx context.Context, t *testing.T, cfg traffic.Config) *load {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	l := &load{cancel: cancel, done: make(chan struct{}), stats: &traffic.Stats{}}
	cfg.Client = &http.Client{Timeout: 2 * time.Second}
	go func() {
		defer close(l.done)
		if _, err := traffic.Run(ctx, cfg, l.stats); err != nil {
			t.Errorf("traffic: %v", err)
		}
	}()
	t.Cleanup(func() { l.stop() })
	return l
}

// stop ends the traffic and returns what it saw.
func (l *load) stop() traffic.Snapshot {
	l.once.Do(func() {
		l.cancel()
		<-l.done
	})
	return l.stats.Snapshot()
}

// dashboardQueries reads the PromQL of every panel of a dashboard file, by
// panel title.
func dashboardQueries(t *testing.T, path string) map[string][]string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var board struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &board); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	out := map[string][]string{}
	for _, p := range board.Panels {
		for _, tg := range p.Targets {
			out[p.Title] = append(out[p.Title], tg.Expr)
		}
	}
	return out
}

// querySeries runs an instant query and counts the series it returns.
func querySeries(ctx context.Context, promAddr, query string) (int, error) {
	u := "http://" + promAddr + "/api/v1/query?query=" + url.QueryEscape(query)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return 0, err
	}
	if body.Status != "success" {
		return 0, fmt.Errorf("%s", body.Error)
	}
	return len(body.Data.Result), nil
}
