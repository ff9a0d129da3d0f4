package app_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rl-exporter/rl-exporter/app"
	"github.com/rl-exporter/rl-exporter/config"
	"github.com/rl-exporter/rl-exporter/internal/eventually"
	"github.com/rl-exporter/rl-exporter/internal/redistest"
)

// evalCounter is a go-redis hook counting script calls (EVALSHA), alone or pipelined; a
// script's first call, refused NOSCRIPT, is sent again as EVAL, not counted.
type evalCounter struct{ n atomic.Int64 }

func (*evalCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *evalCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.count(cmd)
		return next(ctx, cmd)
	}
}

func (c *evalCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			c.count(cmd)
		}
		return next(ctx, cmds)
	}
}

func (c *evalCounter) count(cmd redis.Cmder) {
	if strings.ToLower(cmd.Name()) == "evalsha" {
		c.n.Add(1)
	}
}

// A class with shares decides most requests without Redis, refuses past the limit, and gives
// its unused units back when the process stops: Redis then counts exactly what was admitted.
func TestAClassWithSharesDecidesLocallyAndGivesBackOnShutdown(t *testing.T) {
	rdb := redistest.Single(t)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer up.Close()
	file := filepath.Join(t.TempDir(), "rl.yaml")
	yaml := fmt.Sprintf(`
server: {listen: "127.0.0.1:0", upstream: %q}
store: {type: redis, timeout: 1s, redis: {url: %q}}
classes:
  api:
    routes: ["GET /orders/{id}"]
    shares: {enabled: true, interval: 10s}
    limits:
      default: {algorithm: fixed_window, rate: 1000, period: 1h, align_windows: true}
`, up.URL, rdb.URL())
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := (&config.Sources{File: file}).Load()
	if err != nil {
		t.Fatal(err)
	}
	evals := &evalCounter{}
	built, err := app.Build(cfg, app.Deps{InstrumentRedis: func(c redis.UniversalClient) error {
		c.AddHook(evals)
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- built.Serve(ctx) }()
	select {
	case <-built.Ready():
	case err := <-done:
		t.Fatalf("serve ended before it was ready: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("serve not ready within 10s")
	}
	var before int64
	statuses := map[int]int{}
	for i := range 30 {
		if i == 10 { // the first chunks are used up
			before = evals.n.Load()
		}
		resp, err := http.Get("http://" + built.Addr("main") + "/orders/42")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		statuses[resp.StatusCode]++
	}
	if statuses[http.StatusOK] != 30 {
		t.Fatalf("statuses %v, want 30 × 200", statuses)
	}
	// 3 plain decisions, then chunks of 8 and 24 units (at most a tenth of the quota):
	// requests 11 to 30 take the chunk of 24 and settle the used-up one of 8, two calls for
	// 20 requests.
	if n := evals.n.Load() - before; n > 2 {
		t.Errorf("requests 11 to 30 made %d script calls to Redis, want 2", n)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v", err)
	}
	keys, err := rdb.Do("KEYS", "*fixed_window*")
	if err != nil {
		t.Fatal(err)
	}
	var counted []string
	for _, k := range keys.([]any) {
		if k := k.(string); !strings.HasSuffix(k, ":resv") {
			n, err := rdb.Do("HGET", k, "n")
			if err != nil {
				t.Fatal(err)
			}
			counted = append(counted, fmt.Sprint(n))
		}
	}
	if fmt.Sprint(counted) != "[30]" {
		t.Errorf("after shutdown Redis counts %v, want [30]: the unused units given back", counted)
	}
}

// servedWithMetrics builds serve from cfg with its telemetry wired as `rl-exporter serve`
// wires it, the shares' metrics registered, its log to logger (nil: discarded), and serves it
// until stop, which returns Serve's error. scrape GETs /metrics of the main listener while it
// serves; gather renders the same registry without it, after stop.
func servedWithMetrics(t *testing.T, cfg *config.Config, logger *slog.Logger) (built *app.Built, scrape, gather func() string, stop func() error) {
	t.Helper()
	tel, err := app.NewTelemetry(context.Background(), cfg, app.TelemetryInfo{TraceWriter: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	built, err = app.Build(cfg, tel.Deps(logger))
	if err != nil {
		t.Fatal(err)
	}
	if err := tel.Register(built.SharesMetrics()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- built.Serve(ctx) }()
	select {
	case <-built.Ready():
	case err := <-done:
		t.Fatalf("serve ended before it was ready: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("serve not ready within 10s")
	}
	var once sync.Once
	var serveErr error
	stop = func() error {
		once.Do(func() { cancel(); serveErr = <-done })
		return serveErr
	}
	t.Cleanup(func() { _ = stop() })
	scrape = func() string {
		resp, err := http.Get("http://" + built.Addr("main") + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
		}
		return string(b)
	}
	gather = func() string {
		rec := httptest.NewRecorder()
		tel.Collector.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		return rec.Body.String()
	}
	return built, scrape, gather, stop
}

// sharesSeries are the rate_limit_shares_* samples of a scrape, by series.
func sharesSeries(t *testing.T, body string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, m := range sharesSample.FindAllStringSubmatch(body, -1) {
		v, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			t.Fatalf("sample %q: %v", m[0], err)
		}
		out[m[1]] = v
	}
	return out
}

var sharesSample = regexp.MustCompile(`(?m)^(rate_limit_shares_[a-z_]+(?:\{[^}]*\})?) (\S+)$`)

// sharesOf are the names of a class's series, as sharesSeries returns them.
type sharesOf string

func (c sharesOf) reservations() string {
	return fmt.Sprintf("rate_limit_shares_reservations_total{class=%q}", string(c))
}
func (c sharesOf) taken() string {
	return fmt.Sprintf(`rate_limit_shares_units_total{class=%q,kind="taken"}`, string(c))
}
func (c sharesOf) returned() string {
	return fmt.Sprintf(`rate_limit_shares_units_total{class=%q,kind="returned"}`, string(c))
}
func (c sharesOf) giveBacks() string {
	return fmt.Sprintf("rate_limit_shares_give_backs_total{class=%q}", string(c))
}
func (c sharesOf) errors() string {
	return fmt.Sprintf("rate_limit_shares_give_back_errors_total{class=%q}", string(c))
}
func (c sharesOf) plain() string {
	return fmt.Sprintf("rate_limit_shares_plain_decisions_total{class=%q}", string(c))
}

// zero is every series of the class at zero.
func (c sharesOf) zero() map[string]float64 {
	return map[string]float64{c.reservations(): 0, c.taken(): 0, c.returned(): 0, c.giveBacks(): 0, c.errors(): 0, c.plain(): 0}
}

// of keeps the series of the class among s.
func (c sharesOf) of(s map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for name, v := range s {
		if strings.Contains(name, fmt.Sprintf("class=%q", string(c))) {
			out[name] = v
		}
	}
	return out
}

// getMain sends n GETs of path to built's main listener and fails t unless each is let through.
func getMain(t *testing.T, built *app.Built, path string, n int) {
	t.Helper()
	for range n {
		resp, err := http.Get("http://" + built.Addr("main") + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d, want 200", path, resp.StatusCode)
		}
	}
}

// sharesClass is a class of sharesConfig: its name, its one route, and its shares' interval
// ("" for none).
type sharesClass struct{ name, route, interval string }

// sharesConfig is serve's config on rdb with classes, the first the default, each of a limit
// of 1000 an hour.
func sharesConfig(t *testing.T, rdb *redistest.Server, upstream string, classes ...sharesClass) *config.Config {
	t.Helper()
	yaml := fmt.Sprintf("server: {listen: \"127.0.0.1:0\", upstream: %q}\nstore: {type: redis, timeout: 1s, redis: {url: %q}}\ndefault_class: %s\nclasses:\n",
		upstream, rdb.URL(), classes[0].name)
	for _, c := range classes {
		shares := ""
		if c.interval != "" {
			shares = fmt.Sprintf("    shares: {enabled: true, interval: %s}\n", c.interval)
		}
		yaml += fmt.Sprintf("  %s:\n    routes: [%q]\n%s    limits:\n      default: {algorithm: fixed_window, rate: 1000, period: 1h, align_windows: true}\n", c.name, c.route, shares)
	}
	cfg, err := config.Parse("rl.yaml", []byte(yaml))
	if err != nil {
		t.Fatalf("%v\n%s", err, yaml)
	}
	return cfg
}

// /metrics shows no shares series until a reload gives a class shares, then that class's
// series, at zero, then its counts while serving; a class given shares by a later reload
// (another interval) shows its own, and its decisions move no other class's; a reload taking
// a class's shares away takes its series away, and one giving them back brings them back
// where they were. After shutdown, with every chunk given back, each class's chunks used and
// plain decisions add up to its requests.
func TestSharesCountsShowOnMetricsByClassAcrossReloadsAndAddUpToTheDecisions(t *testing.T) {
	rdb := redistest.Single(t)
	up := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer up.Close()
	orders, search := sharesClass{"api", "GET /orders/{id}", ""}, sharesClass{"search", "GET /search", ""}
	api, srch := sharesOf("api"), sharesOf("search")
	built, scrape, gather, stop := servedWithMetrics(t, sharesConfig(t, rdb, up.URL, orders, search), nil)
	if s := sharesSeries(t, scrape()); len(s) != 0 {
		t.Fatalf("with no class with shares /metrics shows %v, want no rate_limit_shares_ series", s)
	}
	reload := func(what string, classes ...sharesClass) {
		t.Helper()
		if err := built.Reload(sharesConfig(t, rdb, up.URL, classes...)); err != nil {
			t.Fatalf("reload %s: %v", what, err)
		}
	}

	orders.interval = "10s"
	reload("giving api shares", orders, search)
	if s := sharesSeries(t, scrape()); fmt.Sprint(s) != fmt.Sprint(api.zero()) {
		t.Fatalf("once class api has shares /metrics shows %v, want its every series at zero: %v", s, api.zero())
	}
	getMain(t, built, "/orders/42", 30)
	first := sharesSeries(t, scrape())
	// A key's first decision is plain (it asked too little yet); the rest came from chunks.
	if first[api.reservations()] < 1 || first[api.plain()] < 1 || first[api.taken()]+first[api.plain()] < 30 || first[api.errors()] != 0 {
		t.Fatalf("after 30 decisions of class api /metrics shows %v, want reservations and plain decisions, as many units taken as the rest, no give-back error", first)
	}

	// A reload giving search shares of another interval shows search's series beside api's;
	// search's decisions count under search alone.
	search.interval = "5s"
	reload("giving search shares", orders, search)
	if s := srch.of(sharesSeries(t, scrape())); fmt.Sprint(s) != fmt.Sprint(srch.zero()) {
		t.Fatalf("once class search has shares /metrics shows %v of it, want its every series at zero: %v", s, srch.zero())
	}
	getMain(t, built, "/search", 30)
	second := sharesSeries(t, scrape())
	if s := srch.of(second); s[srch.reservations()] < 1 || s[srch.plain()] < 1 || s[srch.taken()]+s[srch.plain()] < 30 {
		t.Errorf("after 30 decisions of class search /metrics shows %v of it, want its reservations, plain decisions and units taken", s)
	}
	for _, name := range []string{api.reservations(), api.plain(), api.taken()} {
		if second[name] != first[name] {
			t.Errorf("%s: %v after class search's decisions, %v before: counted under the wrong class", name, second[name], first[name])
		}
	}

	// A reload taking api's shares away takes its series away; one giving them back brings
	// them back, counted since start.
	orders.interval = ""
	reload("taking api's shares away", orders, search)
	if s := sharesSeries(t, scrape()); len(api.of(s)) != 0 || len(srch.of(s)) != 6 {
		t.Fatalf("once class api has no shares /metrics shows %v, want search's 6 series alone", s)
	}
	orders.interval = "10s"
	reload("giving api its shares back", orders, search)
	if s := api.of(sharesSeries(t, scrape())); s[api.reservations()] < first[api.reservations()] || len(s) != 6 {
		t.Fatalf("once class api has shares again /metrics shows %v of it, want its 6 series, at least where they were: %v", s, api.of(first))
	}

	if err := stop(); err != nil {
		t.Fatalf("serve: %v", err)
	}
	end := sharesSeries(t, gather())
	for _, c := range []sharesOf{api, srch} {
		if end[c.giveBacks()] != end[c.reservations()] || end[c.errors()] != 0 {
			t.Errorf("after shutdown /metrics shows %v of class %s: want every chunk reserved given back, none failed", c.of(end), string(c))
		}
		if used := end[c.taken()] - end[c.returned()]; used+end[c.plain()] != 30 {
			t.Errorf("after shutdown class %s used %v units of its chunks and made %v plain decisions, want 30 in all: %v", string(c), used, end[c.plain()], c.of(end))
		}
	}
}

// A chunk given back while Redis is down is counted as a give-back error of its class on
// /metrics, as the shutdown's error says, and logged at WARN naming the class.
func TestAGiveBackRedisDoesNotAnswerShowsOnMetricsAndInTheLog(t *testing.T) {
	rdb := redistest.Single(t)
	up := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer up.Close()
	var log lockedBuffer
	// At 10s no sweep gives the chunk back while the test runs: shutdown does.
	built, scrape, gather, stop := servedWithMetrics(t, sharesConfig(t, rdb, up.URL, sharesClass{"api", "GET /orders/{id}", "10s"}),
		slog.New(slog.NewJSONHandler(&log, nil)))
	api := sharesOf("api")
	getMain(t, built, "/orders/42", 30)
	before := sharesSeries(t, scrape())
	if before[api.reservations()] <= before[api.giveBacks()] || before[api.errors()] != 0 {
		t.Fatalf("after 30 decisions /metrics shows %v: want a chunk in hand (reserved, not given back), no give-back error", before)
	}
	rdb.Stop()
	err := stop()
	if err == nil || !strings.Contains(err.Error(), "given back") {
		t.Errorf("serve's error with Redis down at shutdown: %v, want the chunks not given back named", err)
	}
	var end map[string]float64
	eventually.True(t, 10*time.Second, "the failed give-back counted", func() bool {
		end = sharesSeries(t, gather())
		return end[api.errors()] >= 1
	})
	if failed, sent := end[api.errors()], end[api.giveBacks()]-before[api.giveBacks()]; failed != sent {
		t.Errorf("%v give-backs sent with Redis down, %v counted as failed: %v", sent, failed, end)
	}
	var warned []string
	for _, l := range strings.Split(log.String(), "\n") {
		if strings.Contains(l, `"level":"WARN"`) && strings.Contains(l, "did not acknowledge a chunk given back") {
			warned = append(warned, l)
		}
	}
	if len(warned) != 1 || !strings.Contains(warned[0], `"class":"api"`) || !strings.Contains(warned[0], `"units":`) || !strings.Contains(warned[0], `"error":`) {
		t.Errorf("serve's log of the failed give-backs: %q, want one WARN line naming class api, the units lost and the error\n%s", warned, log.String())
	}
}

// lockedBuffer is a log written by several goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
