package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	ext_authzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3" // resolves the Router's @type
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/rl-exporter/rl-exporter/internal/eventually"
)

// The example files the gateway tests run, and the addresses in them that
// the tests replace with free ones.
const (
	forwardAuthConfig = "../examples/forward-auth.yaml"
	exampleRL         = "127.0.0.1:8480" // rl-exporter serve
	exampleAPI        = "127.0.0.1:8481" // the API behind the gateway
)

// api is the service behind a gateway: it answers 200 and remembers the
// paths it was asked for.
type api struct {
	*httptest.Server
	mu   sync.Mutex
	seen map[string]int
}

func newAPI(t *testing.T) *api { return newAPIWith(t, nil) }

// newAPIWith is newAPI answering hdr on every response as well.
func newAPIWith(t *testing.T, hdr map[string]string) *api {
	a := &api{seen: map[string]int{}}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.seen[r.URL.Path]++
		a.mu.Unlock()
		for k, v := range hdr {
			w.Header().Set(k, v)
		}
		_, _ = io.WriteString(w, "api\n")
	}))
	t.Cleanup(a.Close)
	return a
}

func (a *api) count(path string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.seen[path]
}

// startForwardAuth runs rl-exporter serve with examples/forward-auth.yaml
// (5 per minute per client) on a free port and returns its address.
func startForwardAuth(ctx context.Context, t *testing.T, dir string) string {
	t.Helper()
	return startServe(ctx, t, dir, forwardAuthConfig)
}

// startServe runs rl-exporter serve with the config file on a free port and returns its address.
func startServe(ctx context.Context, t *testing.T, dir, config string) string {
	t.Helper()
	addr := freeAddr(t)
	cfg, err := filepath.Abs(config)
	if err != nil {
		t.Fatal(err)
	}
	start(t, dir, "serve", binary, "serve", "--config", cfg, "--listen", addr)
	waitHTTP(ctx, t, "http://"+addr+"/healthz")
	return addr
}

// fromExample writes the example file to dir with each old string replaced
// by its new one; a string the example lacks fails the test, so that the
// example cannot drift from what is tested.
func fromExample(t *testing.T, example, dir string, oldNew ...string) string {
	t.Helper()
	out := filepath.Join(dir, filepath.Base(example))
	writeFile(t, out, replaced(t, example, oldNew...))
	return out
}

// editFile replaces in the file at path each old string by its new one, as fromExample does.
func editFile(t *testing.T, path string, oldNew ...string) {
	t.Helper()
	writeFile(t, path, replaced(t, path, oldNew...))
}

// replaced is the file at path with each old string replaced by its new one; a string the
// file lacks fails the test.
func replaced(t *testing.T, path string, oldNew ...string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for i := 0; i < len(oldNew); i += 2 {
		if !strings.Contains(s, oldNew[i]) {
			t.Fatalf("%s no longer contains %q, which the test replaces", path, oldNew[i])
		}
		s = strings.ReplaceAll(s, oldNew[i], oldNew[i+1])
	}
	return s
}

// gateway finds the gateway's program or fails in one line naming the
// Debian package.
func gateway(t *testing.T, name string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if p := "/usr/sbin/" + name; fileExists(p) {
		return p
	}
	t.Fatalf("%s not found: install the Debian package %s (`make deps` installs it)", name, name)
	return ""
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// clientFrom is an HTTP client whose connections leave from ip, a loopback
// address other than the gateway's: a client rl-exporter does not trust.
func clientFrom(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}, Timeout: 10 * time.Second}
}

// answer is one response as the client saw it.
type answer struct {
	code int
	hdr  http.Header
	body string
}

func send(t *testing.T, c *http.Client, method, url string, hdr map[string]string) answer {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, string(b)}
}

var secondsLeft = regexp.MustCompile(`;t=(\d+)`)

// windowLeft is the seconds left in the window of a RateLimit header, -1
// when it has none.
func windowLeft(h http.Header) int {
	m := secondsLeft.FindStringSubmatch(h.Get("RateLimit"))
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// countdown sends six requests of one client through do on the
// 5-per-minute limit: five are allowed (allowed checks what else they
// carry), the sixth is a 429 with Retry-After, the rate-limit headers and
// the JSON body. A client whose window has under 5 s left after its first
// request is set aside for the next of clients, so that no window ends
// mid-test. It returns the client used.
func countdown(t *testing.T, clients []string, do func(client string, i int) answer, allowed func(i int, a answer)) string {
	t.Helper()
	var client string
	for _, cand := range clients {
		a := do(cand, 1)
		if a.code != http.StatusOK {
			t.Fatalf("request 1 of %s: status %d %q, headers %v; want 200", cand, a.code, a.body, a.hdr)
		}
		allowed(1, a)
		if left := windowLeft(a.hdr); left < 0 || left >= 5 {
			client = cand
			break
		}
	}
	if client == "" {
		t.Fatalf("the window of every client of %v was about to end", clients)
	}
	for i := 2; i <= 5; i++ {
		a := do(client, i)
		if a.code != http.StatusOK {
			t.Fatalf("request %d of %s: status %d %q; want 200", i, client, a.code, a.body)
		}
		allowed(i, a)
	}
	a := do(client, 6)
	var body struct {
		Error      string `json:"error"`
		RetryAfter int64  `json:"retry_after"`
	}
	if a.code != http.StatusTooManyRequests || json.Unmarshal([]byte(a.body), &body) != nil || body.Error != "rate_limit_exceeded" {
		t.Fatalf("request 6 of %s: status %d %q; want 429 with the JSON body", client, a.code, a.body)
	}
	retry, err := strconv.Atoi(a.hdr.Get("Retry-After"))
	if err != nil || retry < 1 || int64(retry) != body.RetryAfter || a.hdr.Get("RateLimit") == "" || a.hdr.Get("X-RateLimit-Remaining") != "0" || a.hdr.Get("Cache-Control") != "no-store" {
		t.Errorf("429 headers %v: want Retry-After ≥ 1 (the body's %d), RateLimit, X-RateLimit-Remaining: 0 and Cache-Control: no-store", a.hdr, body.RetryAfter)
	}
	return client
}

// sixRequests runs countdown through the gateway at base from untrusted
// loopback clients, each request with another forged X-Forwarded-For (were
// it believed, each would be a new client): the five allowed reach the API
// with the rate-limit headers at the client, the sixth never does, and
// another client is not refused.
func sixRequests(t *testing.T, base string, up *api) {
	t.Helper()
	forged := func(i int) map[string]string {
		return map[string]string{"X-Forwarded-For": fmt.Sprintf("203.0.113.%d", i)}
	}
	path := func(client string, i int) string { return fmt.Sprintf("/api/%s/%d", client, i) }
	ip := countdown(t, []string{"127.0.0.2", "127.0.0.3", "127.0.0.4"},
		func(client string, i int) answer {
			return send(t, clientFrom(client), "GET", base+path(client, i), forged(i))
		},
		func(i int, a answer) {
			if a.body != "api\n" {
				t.Errorf("request %d: body %q, want the API's", i, a.body)
			}
			if got := a.hdr.Get("X-RateLimit-Remaining"); got != strconv.Itoa(5-i) || a.hdr.Get("RateLimit") == "" {
				t.Errorf("request %d: X-RateLimit-Remaining %q, RateLimit %q at the client; want %d and a value", i, got, a.hdr.Get("RateLimit"), 5-i)
			}
		})
	if n := up.count(path(ip, 6)); n != 0 {
		t.Errorf("the API saw the refused request %d times", n)
	}
	if n := up.count(path(ip, 5)); n != 1 {
		t.Errorf("the API saw the fifth request %d times, want 1", n)
	}
	other := "127.0.0.10"
	if a := send(t, clientFrom(other), "GET", base+path(other, 1), forged(6)); a.code != http.StatusOK {
		t.Errorf("another client %s: status %d %q; want 200 on its own budget", other, a.code, a.body)
	}
}

// behindGateway starts serve on examples/forward-auth.yaml and the API,
// writes the gateway's example with their addresses and the gateway's own
// (listenOld replaced by listenNew of it), runs the gateway with run and
// waits until it listens; it returns the gateway's URL and the API.
func behindGateway(t *testing.T, example, listenOld string, listenNew func(addr string) string, run func(dir, conf string)) (string, *api) {
	t.Helper()
	up := newAPI(t)
	base, _ := serveBehindGateway(t, forwardAuthConfig, up.addr(), example, listenOld, listenNew, run)
	return base, up
}

// addr is the API's host:port.
func (a *api) addr() string { return strings.TrimPrefix(a.URL, "http://") }

// serveBehindGateway is behindGateway with serve on config and the API on apiAddr; it returns
// the gateway's URL and serve's.
func serveBehindGateway(t *testing.T, config, apiAddr, example, listenOld string, listenNew func(addr string) string, run func(dir, conf string)) (string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	rl := startServe(ctx, t, dir, config)
	listen := freeAddr(t)
	conf := fromExample(t, example, dir, exampleRL, rl, exampleAPI, apiAddr, listenOld, listenNew(listen))
	run(dir, conf)
	waitListening(ctx, t, listen)
	return "http://" + listen, "http://" + rl
}

// nginxConf is the nginx example the nginx tests run, on examples/forward-auth.yaml or, charging
// each request the API's usage, forwardAuthCostConfig.
const (
	nginxConf             = "../examples/nginx/nginx.conf"
	forwardAuthCostConfig = "../examples/forward-auth-cost.yaml"
	nginxListenOld        = "listen 127.0.0.1:8080;"
)

func nginxListen(a string) string { return "listen " + a + ";" }

// runNginx returns the run of behindGateway for nginx, and the path of its error log: the
// example's own nginx.conf as its documented command runs it (nginx -p <its directory>),
// the error log in a file the test reads, and workers that may read the test's directory.
func runNginx(t *testing.T) (func(dir, conf string), *string) {
	nginx := gateway(t, "nginx")
	errLog := new(string)
	return func(dir, conf string) {
		*errLog = filepath.Join(dir, "nginx-error.log")
		editFile(t, conf, "error_log stderr warn;", "error_log "+*errLog+" warn;", "pid nginx.pid;", "pid nginx.pid;\nuser root;")
		start(t, dir, "nginx", nginx, "-p", dir+"/", "-e", *errLog, "-c", filepath.Base(conf))
	}, errLog
}

func TestNginxAuthRequestLimitsEachClientBehindIt(t *testing.T) {
	run, errLog := runNginx(t)
	base, up := behindGateway(t, nginxConf, nginxListenOld, nginxListen, run)
	sixRequests(t, base, up)
	if b, _ := os.ReadFile(*errLog); strings.Contains(string(b), "auth request unexpected status") {
		t.Errorf("nginx logged refusals as errors:\n%s", b)
	}
}

// Behind nginx, a class with cost_from (estimate 100, 1,000 a minute) is charged what the API
// reports in X-Usage-Tokens (300), not its estimate: post_action settles each reservation once
// the response is over, so the budget is spent after three requests and a half.
func TestNginxSettlesEachReservationAtTheAPIsUsage(t *testing.T) {
	run, errLog := runNginx(t)
	up := newAPIWith(t, map[string]string{"X-Usage-Tokens": "300"})
	base, rl := serveBehindGateway(t, forwardAuthCostConfig, up.addr(), nginxConf, nginxListenOld, nginxListen, run)
	used := func(client string) int64 {
		resp, err := http.Get(rl + "/v1/usage?key=ip:" + client)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var rep struct {
			Limits []struct {
				Class string `json:"class"`
				Used  int64  `json:"used"`
			} `json:"limits"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("usage of %s: status %d, %v", client, resp.StatusCode, err)
		}
		for _, l := range rep.Limits {
			if l.Class == "completions" {
				return l.Used
			}
		}
		t.Fatalf("usage of %s: no completions budget in %+v", client, rep)
		return 0
	}
	ask := func(client string, i int) answer {
		return send(t, clientFrom(client), "POST", fmt.Sprintf("%s/v1/completions?i=%d", base, i), nil)
	}
	settledAt := func(client string, want int64) {
		t.Helper()
		var got int64
		if !eventually.Within(10*time.Second, func() bool { got = used(client); return got == want }) {
			t.Fatalf("usage of %s: %d used, want %d", client, got, want)
		}
	}
	var client string
	for _, cand := range []string{"127.0.0.2", "127.0.0.3", "127.0.0.4"} {
		if a := ask(cand, 1); a.code != http.StatusOK || a.body != "api\n" {
			t.Fatalf("request 1 of %s: status %d %q; want the API's 200", cand, a.code, a.body)
		} else if a.hdr.Get("X-RateLimit-Remaining") != "900" {
			t.Errorf("request 1 of %s: X-RateLimit-Remaining %q, want 900 (the estimate reserved)", cand, a.hdr.Get("X-RateLimit-Remaining"))
		} else if left := windowLeft(a.hdr); left < 0 || left >= 10 {
			client = cand
		}
		settledAt(cand, 300)
		if client != "" {
			break
		}
	}
	if client == "" {
		t.Fatal("the window of every client was about to end")
	}
	for i, want := range []string{"600", "300"} { // 1000 − 300 per settled request − 100 reserved
		if a := ask(client, i+2); a.code != http.StatusOK || a.hdr.Get("X-RateLimit-Remaining") != want {
			t.Fatalf("request %d: status %d, X-RateLimit-Remaining %q; want 200 and %s", i+2, a.code, a.hdr.Get("X-RateLimit-Remaining"), want)
		}
		settledAt(client, int64(300*(i+2)))
	}
	// The 100 left hold the 4th estimate; settled at 300, it takes 200 past the quota.
	before := costMetric(t, rl, `phase="committed"`)
	if a := ask(client, 4); a.code != http.StatusOK || a.hdr.Get("X-RateLimit-Remaining") != "0" {
		t.Fatalf("request 4: status %d, X-RateLimit-Remaining %q; want 200 and 0", a.code, a.hdr.Get("X-RateLimit-Remaining"))
	}
	var committed float64
	if !eventually.Within(10*time.Second, func() bool { committed = costMetric(t, rl, `phase="committed"`); return committed == before+300 }) {
		t.Fatalf("rate_limit_cost_total committed %v after request 4, want %v: 300 more", committed, before+300)
	}
	if a := ask(client, 5); a.code != http.StatusTooManyRequests {
		t.Fatalf("request 5: status %d %q; want 429, the budget spent", a.code, a.body)
	}
	if n := up.count("/v1/completions"); n < 4 {
		t.Errorf("the API saw %d requests, want the 4 allowed", n)
	}
	if b, _ := os.ReadFile(*errLog); strings.Contains(string(b), "[error]") {
		t.Errorf("nginx logged errors:\n%s", b)
	}
}

// listLeaseCostConfig is serve for nginx with a tier of two limits: tokens per minute read from
// the API's X-Usage-Tokens, and at most 2 requests in flight.
const listLeaseCostConfig = `server:
  check_api:
    allowed_peers: [127.0.0.1/32]
identity:
  trusted_proxies: [127.0.0.1/32]
classes:
  completions:
    routes: ["/v1/completions"]
    cost_from: {header: X-Usage-Tokens}
    estimate: 100
    reserve: {hold: 5m, on_expiry: charge}
    limits:
      default:
        - {name: tpm, algorithm: fixed_window, rate: 100000, period: 1h}
        - {name: inflight, algorithm: concurrency, limit: 2, lease_ttl: 1m}
  default:
    limits:
      default: {algorithm: fixed_window, rate: 1000, period: 1m}
`

// Behind nginx, a request of a tier holding a lease and a reservation both ends with its one
// post_action: the lease is given back and the tokens are settled at the API's usage, not left
// to expire at the estimate.
func TestNginxReleasesTheLeaseAndSettlesTheCostOfATierOfBoth(t *testing.T) {
	run, errLog := runNginx(t)
	up := newAPIWith(t, map[string]string{"X-Usage-Tokens": "300"})
	cfg := filepath.Join(t.TempDir(), "list.yaml")
	writeFile(t, cfg, listLeaseCostConfig)
	base, rl := serveBehindGateway(t, cfg, up.addr(), nginxConf, nginxListenOld, nginxListen, run)
	used := func() int64 {
		used, _ := listLimitUsage(t, rl, "ip:127.0.0.2", "completions", "tpm")
		return used
	}
	c := clientFrom("127.0.0.2")
	for i := range 3 { // more than the 2 in flight: each lease was given back
		if a := send(t, c, "POST", fmt.Sprintf("%s/v1/completions?i=%d", base, i), nil); a.code != http.StatusOK || a.body != "api\n" {
			t.Fatalf("request %d: status %d %q; want the API's 200", i+1, a.code, a.body)
		}
		var got int64
		if !eventually.Within(10*time.Second, func() bool { got = used(); return got == int64(300*(i+1)) }) {
			t.Fatalf("after request %d tpm used %d, want %d: each settled at the API's 300", i+1, got, 300*(i+1))
		}
		var n float64
		if !eventually.Within(10*time.Second, func() bool {
			n = metricSum(t, rl, "rate_limit_in_flight", `endpoint="/v1/completions"`)
			return n == 0
		}) {
			t.Fatalf("after request %d rate_limit_in_flight %v, want 0: the lease given back", i+1, n)
		}
	}
	if b, _ := os.ReadFile(*errLog); strings.Contains(string(b), "[error]") {
		t.Errorf("nginx logged errors:\n%s", b)
	}
}

// manyLimitsConfig is serve for nginx with a tier of twelve limits of cost per client, keyed by
// the user id nginx sets (identity.user_header): with an id of 256 bytes, the longest kept as it
// is, the token /v1/auth answers names twelve keys of some 300 bytes, over 5 KiB in all.
func manyLimitsConfig() string {
	var b strings.Builder
	b.WriteString(`server:
  check_api:
    allowed_peers: [127.0.0.1/32]
identity:
  trusted_proxies: [127.0.0.1/32]
  trusted_header_peers: [127.0.0.1/32]
  user_header: X-User-ID
classes:
  completions:
    routes: ["/v1/completions"]
    cost_from: {header: X-Usage-Tokens}
    estimate: 100
    reserve: {hold: 5m, on_expiry: charge}
    limits:
      default:
`)
	for i := range 12 {
		fmt.Fprintf(&b, "        - {name: t%d, algorithm: fixed_window, rate: 100000, period: 1h}\n", i)
	}
	b.WriteString(`  default:
    limits:
      default: {algorithm: fixed_window, rate: 1000, period: 1m}
`)
	return b.String()
}

// Behind nginx, the reservation of a tier of many limits on a long user id is settled at the
// API's usage: the example's auth location reads an answer whose token is past a memory page,
// nginx's default proxy_buffer_size, with which nginx took the answer as its failure ("upstream
// sent too big header"), let the request through unchecked and left its estimate held.
func TestNginxSettlesTheLongTokenOfATierOfManyLimits(t *testing.T) {
	run, errLog := runNginx(t)
	withUser := func(dir, conf string) {
		editFile(t, conf, `proxy_set_header X-User-ID "";`, `proxy_set_header X-User-ID $http_x_user_id;`)
		run(dir, conf)
	}
	up := newAPIWith(t, map[string]string{"X-Usage-Tokens": "300"})
	cfg := filepath.Join(t.TempDir(), "many.yaml")
	writeFile(t, cfg, manyLimitsConfig())
	base, rl := serveBehindGateway(t, cfg, up.addr(), nginxConf, nginxListenOld, nginxListen, withUser)
	user := strings.Repeat("u", 256)
	used := func() (int64, int64) { return listLimitUsage(t, rl, "user:"+user, "completions", "t11") }
	for i := range 2 {
		a := send(t, clientFrom("127.0.0.2"), "POST", fmt.Sprintf("%s/v1/completions?i=%d", base, i), map[string]string{"X-User-ID": user})
		if a.code != http.StatusOK || a.body != "api\n" || a.hdr.Get("X-RateLimit-Limit") != "100000" {
			t.Fatalf("request %d: status %d %q, X-RateLimit-Limit %q; want the API's 200, decided", i+1, a.code, a.body, a.hdr.Get("X-RateLimit-Limit"))
		}
		var got, open int64
		if !eventually.Within(10*time.Second, func() bool { got, open = used(); return got == int64(300*(i+1)) && open == 0 }) {
			t.Fatalf("after request %d t11 used %d, %d open; want %d, none open: each settled at the API's 300", i+1, got, open, 300*(i+1))
		}
	}
	if b, _ := os.ReadFile(*errLog); strings.Contains(string(b), "[error]") {
		t.Errorf("nginx logged errors:\n%s", b)
	}
}

// leaseConfig is serve for nginx with one class, jobs on /v1/jobs, under a concurrency limit of 2
// per client; a lease lives a minute, longer than the test, so that none expires on its own.
const leaseConfig = `server:
  check_api:
    allowed_peers: [127.0.0.1/32]
identity:
  trusted_proxies: [127.0.0.1/32]
classes:
  jobs:
    routes: ["/v1/jobs"]
    limits:
      default: {algorithm: concurrency, limit: 2, lease_ttl: 1m}
  default:
    limits:
      default: {algorithm: fixed_window, rate: 1000, period: 1m}
`

// Behind nginx, each request on a concurrency limit holds a lease /v1/auth took, and post_action
// gives it back once the response is over: two requests the API holds pass, a third at the same
// time is refused with 429, and once the two are answered requests pass again.
func TestNginxHoldsALeaseForEachRequestInFlight(t *testing.T) {
	run, errLog := runNginx(t)
	entered, release := make(chan struct{}, 10), make(chan struct{})
	var once sync.Once
	done := func() { once.Do(func() { close(release) }) }
	defer done()
	up := &api{seen: map[string]int{}}
	up.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		up.mu.Lock()
		up.seen[r.URL.Path]++
		up.mu.Unlock()
		entered <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, "api\n")
	}))
	t.Cleanup(up.Close)
	cfg := filepath.Join(t.TempDir(), "lease.yaml")
	writeFile(t, cfg, leaseConfig)
	base, rl := serveBehindGateway(t, cfg, up.addr(), nginxConf, nginxListenOld, nginxListen, run)
	c := clientFrom("127.0.0.2")
	inFlight := func() float64 { return metricSum(t, rl, "rate_limit_in_flight", `endpoint="/v1/jobs"`) }
	drained := func(when string) {
		t.Helper()
		var n float64
		if !eventually.Within(10*time.Second, func() bool { n = inFlight(); return n == 0 }) {
			t.Fatalf("%s: rate_limit_in_flight %v, want 0: post_action released every lease", when, n)
		}
	}

	held := make(chan answer, 2)
	for i := range 2 {
		go func() {
			resp, err := c.Get(fmt.Sprintf("%s/v1/jobs?held=%d", base, i))
			if err != nil {
				held <- answer{body: err.Error()}
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			held <- answer{resp.StatusCode, resp.Header, string(b)}
		}()
		select {
		case <-entered:
		case a := <-held:
			t.Fatalf("held request %d answered before reaching the API: %d %q", i+1, a.code, a.body)
		case <-time.After(10 * time.Second):
			t.Fatalf("held request %d never reached the API", i+1)
		}
	}
	if n := inFlight(); n != 2 {
		t.Errorf("rate_limit_in_flight %v with two requests held, want 2", n)
	}
	a := send(t, c, "GET", base+"/v1/jobs?third", nil)
	if a.code != http.StatusTooManyRequests || a.hdr.Get("Retry-After") == "" {
		t.Fatalf("third request while two are held: status %d %q, Retry-After %q; want 429 with Retry-After", a.code, a.body, a.hdr.Get("Retry-After"))
	}
	if n := up.count("/v1/jobs"); n != 2 {
		t.Errorf("the API saw %d requests, want the 2 held", n)
	}
	done()
	for i := range 2 {
		if a := <-held; a.code != http.StatusOK || a.body != "api\n" {
			t.Fatalf("held request %d: status %d %q; want the API's 200", i+1, a.code, a.body)
		}
	}
	drained("after the held requests")
	for i := range 3 {
		if a := send(t, c, "GET", fmt.Sprintf("%s/v1/jobs?after=%d", base, i), nil); a.code != http.StatusOK || a.hdr.Get("X-RateLimit-Limit") != "2" {
			t.Fatalf("request %d after the release: status %d %q, X-RateLimit-Limit %q; want 200 and 2", i+1, a.code, a.body, a.hdr.Get("X-RateLimit-Limit"))
		}
		drained(fmt.Sprintf("after request %d", i+1))
	}
	if b, _ := os.ReadFile(*errLog); strings.Contains(string(b), "[error]") {
		t.Errorf("nginx logged errors:\n%s", b)
	}
}

// costMetric sums the samples of rate_limit_cost_total on serve's /metrics whose labels hold label.
func costMetric(t *testing.T, rl, label string) float64 {
	t.Helper()
	return metricSum(t, rl, "rate_limit_cost_total", label)
}

// metricSum sums the samples of the metric name on serve's /metrics whose labels hold label.
func metricSum(t *testing.T, rl, name, label string) float64 {
	t.Helper()
	resp, err := http.Get(rl + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var sum float64
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, name+"{") && strings.Contains(line, label) {
			v, _ := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			sum += v
		}
	}
	return sum
}

// The Caddy example, and the address in it the tests replace.
const (
	caddyConf      = "../examples/Caddyfile.forward-auth"
	caddyListenOld = "http://127.0.0.1:8080"
)

func caddyListen(a string) string { return "http://" + a }

// runCaddy returns the run of behindGateway for Caddy, its state (HOME and the XDG
// directories, as the example's command keeps it) in the test's directory.
func runCaddy(t *testing.T) func(dir, conf string) {
	caddy := gateway(t, "caddy")
	return func(dir, conf string) {
		startEnv(t, dir, "caddy", []string{"HOME=" + dir, "XDG_DATA_HOME=" + dir, "XDG_CONFIG_HOME=" + dir},
			caddy, "run", "--config", conf, "--adapter", "caddyfile")
	}
}

func TestCaddyForwardAuthLimitsEachClientBehindIt(t *testing.T) {
	base, up := behindGateway(t, caddyConf, caddyListenOld, caddyListen, runCaddy(t))
	sixRequests(t, base, up)
}

// waitListening waits until something accepts on addr.
func waitListening(ctx context.Context, t *testing.T, addr string) {
	t.Helper()
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("nothing listens on %s: %v", addr, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// traefikDynamic is examples/traefik-forward-auth.yaml, decoded strictly: a key this does
// not know (a misspelt option Traefik would ignore) fails the test.
type traefikDynamic struct {
	HTTP struct {
		Routers map[string]struct {
			Rule        string   `yaml:"rule"`
			EntryPoints []string `yaml:"entryPoints"`
			Middlewares []string `yaml:"middlewares"`
			Service     string   `yaml:"service"`
		} `yaml:"routers"`
		Middlewares map[string]struct {
			ForwardAuth *traefikForwardAuth `yaml:"forwardAuth"`
			Headers     *struct {
				CustomRequestHeaders map[string]string `yaml:"customRequestHeaders"`
			} `yaml:"headers"`
		} `yaml:"middlewares"`
		Services map[string]struct {
			LoadBalancer struct {
				Servers []struct {
					URL string `yaml:"url"`
				} `yaml:"servers"`
			} `yaml:"loadBalancer"`
		} `yaml:"services"`
	} `yaml:"http"`
}

// traefikForwardAuth is Traefik's ForwardAuth middleware, the options the example sets.
type traefikForwardAuth struct {
	Address             string   `yaml:"address"`
	TrustForwardHeader  bool     `yaml:"trustForwardHeader"`
	AuthRequestHeaders  []string `yaml:"authRequestHeaders"`
	AuthResponseHeaders []string `yaml:"authResponseHeaders"`
}

// traefikExample decodes examples/traefik-forward-auth.yaml strictly and returns the
// ForwardAuth of its router's chain, and the headers the chain clears before it.
func traefikExample(t *testing.T) (traefikForwardAuth, map[string]bool) {
	t.Helper()
	raw, err := os.ReadFile("../examples/traefik-forward-auth.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg traefikDynamic
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil {
		t.Fatalf("examples/traefik-forward-auth.yaml: %v", err)
	}
	router, ok := cfg.HTTP.Routers["api"]
	if !ok || len(cfg.HTTP.Services[router.Service].LoadBalancer.Servers) == 0 {
		t.Fatalf("no router api with a service: %+v", cfg.HTTP)
	}
	cleared := map[string]bool{}
	for _, name := range router.Middlewares {
		mw, ok := cfg.HTTP.Middlewares[name]
		if !ok {
			t.Fatalf("router api names the middleware %q, which is not defined", name)
		}
		if mw.ForwardAuth != nil {
			return *mw.ForwardAuth, cleared
		}
		if mw.Headers != nil {
			for h, v := range mw.Headers.CustomRequestHeaders {
				if v == "" { // Traefik removes a header set to ""
					cleared[http.CanonicalHeaderKey(h)] = true
				}
			}
		}
	}
	t.Fatalf("router api has no forwardAuth middleware in %v", router.Middlewares)
	return traefikForwardAuth{}, nil
}

// Traefik's chain clears X-User-ID and X-Plan-Tier before its ForwardAuth, and sends
// rl-exporter only the client headers it reads: none rl-exporter believes from Traefik as a
// trusted header peer, none naming the original request.
func TestTraefikExampleSendsNoClientIdentityOrOriginalRequestHeader(t *testing.T) {
	fa, cleared := traefikExample(t)
	for _, h := range []string{"X-User-Id", "X-Plan-Tier"} {
		if !cleared[h] {
			t.Errorf("the chain before forwardAuth leaves the client's %s (cleared: %v)", h, cleared)
		}
	}
	for _, h := range fa.AuthRequestHeaders {
		switch http.CanonicalHeaderKey(h) {
		case "X-User-Id", "X-Plan-Tier", "X-Original-Uri", "X-Original-Method", "X-Forwarded-Uri", "X-Forwarded-Method", "X-Forwarded-Host", "X-Forwarded-For":
			t.Errorf("authRequestHeaders passes the client's own %s to rl-exporter", h)
		}
	}
	if len(fa.AuthRequestHeaders) == 0 || len(fa.AuthRequestHeaders) > 4 {
		t.Errorf("authRequestHeaders %v: want the few headers rl-exporter reads (without it Traefik sends every header)", fa.AuthRequestHeaders)
	}
}

// Traefik's ForwardAuth sends GET to its address with the client's headers
// (only authRequestHeaders, when listed) and X-Forwarded-For (the client's
// address), -Method, -Proto, -Host and -Uri; on a 2xx it copies
// authResponseHeaders onto the request to the API, else it returns the
// answer as it is. The test sends exactly that request for a client whose
// own headers include a forged X-Original-URI and X-Forwarded-For.
func TestTraefikForwardAuthRequestIsDecidedOnItsHeaders(t *testing.T) {
	fa, _ := traefikExample(t)
	if !strings.HasPrefix(fa.Address, "http://"+exampleRL+"/") || fa.TrustForwardHeader || len(fa.AuthResponseHeaders) == 0 {
		t.Fatalf("forwardAuth %+v: want an address on %s, trustForwardHeader false and authResponseHeaders", fa, exampleRL)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rl := startForwardAuth(ctx, t, t.TempDir())
	address := strings.Replace(fa.Address, exampleRL, rl, 1)

	traefik := clientFrom("127.0.0.1")
	forward := func(clientIP string, i int) answer {
		client := http.Header{"X-Original-Uri": {"/cheap"}, "X-Forwarded-For": {"203.0.113.9"}, "User-Agent": {"curl/8"}}
		hdr := map[string]string{}
		for _, h := range fa.AuthRequestHeaders {
			if v := client.Get(h); v != "" {
				hdr[h] = v
			}
		}
		hdr["X-Forwarded-For"] = clientIP
		hdr["X-Forwarded-Method"] = "GET"
		hdr["X-Forwarded-Proto"] = "http"
		hdr["X-Forwarded-Host"] = "shop.example.com"
		hdr["X-Forwarded-Uri"] = fmt.Sprintf("/api/orders/%d?page=1", i)
		return send(t, traefik, "GET", address, hdr)
	}
	countdown(t, []string{"192.0.2.10", "192.0.2.11", "192.0.2.12"}, forward, func(i int, a answer) {
		for _, h := range fa.AuthResponseHeaders {
			if a.hdr.Get(h) == "" {
				t.Errorf("request %d: no %s for Traefik to copy to the API: %v", i, h, a.hdr)
			}
		}
	})
	if a := forward("192.0.2.20", 1); a.code != http.StatusOK {
		t.Errorf("another client: status %d, want 200", a.code)
	}
}

// Envoy's ext_authz HTTP filter sends the original method to path_prefix +
// the original path, with Host, Authorization, Content-Length: 0 and the
// allowed_headers (X-Forwarded-For, to which the connection manager with
// use_remote_address has appended the client's address); on a 200 it gives
// the client the allowed_client_headers_on_success, else the answer with
// every header. The test reads the filter from examples/envoy-ext-authz.yaml
// into go-control-plane's types and sends exactly that request.
func TestEnvoyExtAuthzRequestIsDecidedOnItsPath(t *testing.T) {
	authz := envoyExtAuthz(t)
	svc := authz.GetHttpService()
	if svc.GetPathPrefix() != "/v1/auth" || !strings.Contains(svc.GetServerUri().GetUri(), exampleRL) {
		t.Fatalf("http_service %v: want path_prefix /v1/auth on %s", svc, exampleRL)
	}
	if authz.GetFailureModeAllow() != true {
		t.Errorf("failure_mode_allow false: rl-exporter unreachable would refuse every request")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rl := startForwardAuth(ctx, t, t.TempDir())

	envoy := clientFrom("127.0.0.1")
	client := map[string]string{"x-forwarded-for": "203.0.113.9, 192.0.2.20", "x-api-key": "", "cookie": "s=1", "user-agent": "curl/8"}
	check := func(method, path string) answer {
		req, err := http.NewRequest(method, "http://"+rl+svc.GetPathPrefix()+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = "shop.example.com"
		for k, v := range client {
			if v != "" && matchesAny(authz.GetAllowedHeaders().GetPatterns(), k) {
				req.Header.Set(k, v)
			}
		}
		req.Header.Set("x-envoy-expected-rq-timeout-ms", "250")
		req.ContentLength = 0
		resp, err := envoy.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return answer{resp.StatusCode, resp.Header, string(b)}
	}
	onSuccess := svc.GetAuthorizationResponse().GetAllowedClientHeadersOnSuccess().GetPatterns()
	via := func(clientIP string, i int) answer {
		client["x-forwarded-for"] = "203.0.113.9, " + clientIP
		return check([]string{"GET", "POST"}[i%2], fmt.Sprintf("/api/orders/%d?x=1", i))
	}
	countdown(t, []string{"192.0.2.30", "192.0.2.31", "192.0.2.32"}, via, func(i int, a answer) {
		var toClient []string
		for k := range a.hdr {
			if matchesAny(onSuccess, strings.ToLower(k)) {
				toClient = append(toClient, strings.ToLower(k))
			}
		}
		if len(toClient) < 3 || a.hdr.Get("X-RateLimit-Remaining") != strconv.Itoa(5-i) {
			t.Errorf("check %d: the client would get %v (X-RateLimit-Remaining %q); want ratelimit, ratelimit-policy and x-ratelimit-*", i, toClient, a.hdr.Get("X-RateLimit-Remaining"))
		}
	})
	if a := via("192.0.2.40", 1); a.code != http.StatusOK {
		t.Errorf("another client: status %d, want 200", a.code)
	}
}

// envoyExtAuthz decodes examples/envoy-ext-authz.yaml strictly into Envoy's
// bootstrap and returns its validated ext_authz filter.
func envoyExtAuthz(t *testing.T) *ext_authzv3.ExtAuthz {
	t.Helper()
	raw, err := os.ReadFile("../examples/envoy-ext-authz.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var tree any
	if err := yaml.Unmarshal(raw, &tree); err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(tree)
	if err != nil {
		t.Fatal(err)
	}
	var bs bootstrapv3.Bootstrap
	if err := protojson.Unmarshal(js, &bs); err != nil {
		t.Fatalf("examples/envoy-ext-authz.yaml is not an Envoy bootstrap: %v", err)
	}
	if err := bs.ValidateAll(); err != nil {
		t.Fatalf("bootstrap: %v", err)
	}
	var hcm hcmv3.HttpConnectionManager
	if err := bs.GetStaticResources().GetListeners()[0].GetFilterChains()[0].GetFilters()[0].GetTypedConfig().UnmarshalTo(&hcm); err != nil {
		t.Fatal(err)
	}
	if !hcm.GetUseRemoteAddress().GetValue() {
		t.Error("use_remote_address is not set: X-Forwarded-For would be the client's own")
	}
	for _, f := range hcm.GetHttpFilters() {
		if f.GetName() != "envoy.filters.http.ext_authz" {
			continue
		}
		var authz ext_authzv3.ExtAuthz
		if err := f.GetTypedConfig().UnmarshalTo(&authz); err != nil {
			t.Fatal(err)
		}
		if err := authz.ValidateAll(); err != nil {
			t.Fatalf("ext_authz: %v", err)
		}
		return &authz
	}
	t.Fatal("no envoy.filters.http.ext_authz filter")
	return nil
}

// matchesAny is Envoy's header name match against a ListStringMatcher's
// exact and prefix patterns.
func matchesAny(patterns []*matcherv3.StringMatcher, name string) bool {
	for _, p := range patterns {
		if (p.GetExact() != "" && p.GetExact() == name) || (p.GetPrefix() != "" && strings.HasPrefix(name, p.GetPrefix())) {
			return true
		}
	}
	return false
}

// Envoy's ext_authz sends rl-exporter only the headers it names (Host, the method, the path,
// Content-Length and Authorization always): the example names exact headers alone, none
// rl-exporter would believe from Envoy as a trusted header peer, so that however many or large
// the client's headers, the check stays within rl-exporter's bounds; and no header names the
// original request, which ext_authz gives as the path under path_prefix.
func TestEnvoyExampleSendsOnlyTheHeadersRlExporterReads(t *testing.T) {
	authz := envoyExtAuthz(t)
	patterns := authz.GetAllowedHeaders().GetPatterns()
	if len(patterns) == 0 {
		t.Fatal("no allowed_headers: rl-exporter would not see X-Forwarded-For")
	}
	for _, p := range patterns {
		name := p.GetExact()
		switch {
		case name == "":
			t.Errorf("allowed_headers pattern %v: want exact names (a prefix, suffix or regex lets a client add headers)", p)
		case name == "x-user-id" || name == "x-plan-tier" || strings.HasPrefix(name, "x-original-") || strings.HasPrefix(name, "x-forwarded-uri"):
			t.Errorf("allowed_headers passes the client's own %s to rl-exporter", name)
		}
	}
	if authz.GetHttpService().GetAuthorizationRequest().GetAllowedHeaders() != nil {
		t.Error("http_service.authorization_request.allowed_headers is set: deprecated since Envoy 1.25 for allowed_headers")
	}
}

// listLimitUsage is what /v1/usage of the serve at rl says key used of the limit name of class,
// a class of several limits, and how many of its reservations are open.
func listLimitUsage(t *testing.T, rl, key, class, name string) (used, open int64) {
	t.Helper()
	resp, err := http.Get(rl + "/v1/usage?key=" + key)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// A class of several limits answers for the one nearest its quota, each in its limits.
	var rep struct {
		Limits []struct {
			Class  string `json:"class"`
			Limits []struct {
				Name string `json:"name"`
				Used int64  `json:"used"`
				Open int64  `json:"open_reservations"`
			} `json:"limits"`
		} `json:"limits"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("usage: status %d, %v", resp.StatusCode, err)
	}
	for _, c := range rep.Limits {
		for _, l := range c.Limits {
			if c.Class == class && l.Name == name {
				return l.Used, l.Open
			}
		}
	}
	t.Fatalf("usage of %s: no %s budget of %s in %+v", key, name, class, rep)
	return 0, 0
}
