package server_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/httplimit"
	"github.com/rl-exporter/rl-exporter/internal/eventually"
	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/limiter"
)

// proc is a running rl-exporter serve.
type proc struct {
	cmd   *exec.Cmd
	addrs map[string]string // listener name → host:port
	mu    sync.Mutex
	logs  strings.Builder
	done  chan struct{}
	err   error
}

func (p *proc) url(listener, path string) string { return "http://" + p.addrs[listener] + path }

func (p *proc) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

// stop sends SIGTERM and waits for the exit.
func (p *proc) stop(t *testing.T) error {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Errorf("serve did not exit within 20s of SIGTERM")
	}
	return p.err
}

// writeConfig writes a YAML config into the test's temp dir.
func writeConfig(t *testing.T, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rl.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// startServe runs `rl-exporter serve` with JSON logs on free ports and
// waits until each of the wanted listeners has logged its address.
func startServe(t *testing.T, listeners []string, args ...string) *proc {
	t.Helper()
	return startServeEnv(t, nil, listeners, args...)
}

// startServeEnv is startServe with more environment variables ("NAME=value").
func startServeEnv(t *testing.T, env []string, listeners []string, args ...string) *proc {
	t.Helper()
	args = append([]string{"serve", "--listen", "127.0.0.1:0", "--log-format", "json", "--log-level", "debug"}, args...)
	p := &proc{cmd: exec.Command(binary, args...), addrs: map[string]string{}, done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), env...)
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	found := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		var once sync.Once
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.logs.WriteString(line + "\n")
			var rec struct{ Msg, Listener, Addr string }
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "listening" {
				p.addrs[rec.Listener] = rec.Addr
			}
			all := true
			for _, l := range listeners {
				all = all && p.addrs[l] != ""
			}
			p.mu.Unlock()
			if all {
				once.Do(func() { close(found) })
			}
		}
	}()
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	select {
	case <-found:
	case <-p.done:
		t.Fatalf("serve exited before listening: %v\n%s", p.err, p.log())
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		t.Fatalf("serve did not listen within 15s:\n%s", p.log())
	}
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-p.done:
			case <-time.After(20 * time.Second):
				_ = p.cmd.Process.Kill()
			}
		}
	})
	return p
}

// upstream is a test API that answers 200 with its name.
func upstream(t *testing.T) *httptest.Server {
	s, _, release := slowUpstream(t)
	release()
	return s
}

// slowUpstream is upstream, telling on arrived (without waiting) of each
// request to /slow as it begins to hold it, and holding it until release
// is called (or its client goes away): the upstream's own work, as long as
// the test needs it to be. release may be called more than once.
func slowUpstream(t *testing.T) (s *httptest.Server, arrived <-chan struct{}, release func()) {
	t.Helper()
	arrivals := make(chan struct{}, 16)
	held := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(held) }) }
	// Released before the server closes, which waits for its handlers.
	t.Cleanup(release)
	s = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			select {
			case arrivals <- struct{}{}:
			default:
			}
			select {
			case <-held:
			case <-r.Context().Done():
				return
			}
		}
		w.Header().Set("X-Upstream", "yes")
		fmt.Fprintf(w, "upstream saw %s %s\n", r.Method, r.URL.Path)
	}))
	t.Cleanup(s.Close)
	return s, arrivals, release
}

func get(t *testing.T, url string, hdr map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(strings.NewReader(string(body)))
	return resp
}

func readBody(resp *http.Response) string {
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

const fivePerMinute = `
classes:
  default:
    limits:
      default: {algorithm: fixed_window, rate: 5, period: 1m}
`

func TestServeCountsDownFiveThenAnswers429WithTheSecondsLeftInTheWindow(t *testing.T) {
	up := upstream(t)
	p := startServe(t, []string{"main"}, "--config", writeConfig(t, fivePerMinute), "--upstream", up.URL)
	// The window of this client's key starts at the key's stable offset;
	// do not start the countdown in the last seconds of a window.
	key := "default|default|/|ip:127.0.0.1"
	off := limiter.WindowOffset(key, time.Minute)
	windowLeft := func() time.Duration { return time.Minute - (time.Since(time.Unix(0, 0))-off)%time.Minute }
	// The first request counts down from a window with 5s left at least:
	// in the last seconds of one, ask until the limiter answers from the
	// next (its first 4 left). The answer says which window it came from
	// (X-RateLimit-Reset): a clock read before the request may be in the
	// window before the one that decided it, and that window's first
	// answer, once passed over, does not come again for a minute.
	var first *http.Response
	refused := 0 // in the old window, each logged
	within(t, 10*time.Second, "an answer from a window with 5s left", func() bool {
		first = get(t, p.url("main", "/orders/1"), nil)
		if first.StatusCode == http.StatusTooManyRequests {
			refused++
		}
		reset, err := strconv.ParseInt(first.Header.Get("X-RateLimit-Reset"), 10, 64)
		return first.StatusCode == 200 && first.Header.Get("X-RateLimit-Remaining") == "4" && err == nil &&
			time.Until(time.Unix(reset, 0)) >= 5*time.Second
	})
	for i := 1; i <= 5; i++ {
		resp := first
		if i > 1 {
			resp = get(t, p.url("main", "/orders/1"), nil)
		}
		if resp.StatusCode != 200 || resp.Header.Get("X-Upstream") != "yes" {
			t.Fatalf("request %d: status %d, want 200 from the upstream: %s", i, resp.StatusCode, readBody(resp))
		}
		want := strconv.Itoa(5 - i)
		if got := resp.Header.Get("X-RateLimit-Remaining"); got != want {
			t.Errorf("request %d: X-RateLimit-Remaining %q, want %s", i, got, want)
		}
		if got := resp.Header.Get("RateLimit"); !strings.Contains(got, ";r="+want+";") {
			t.Errorf("request %d: RateLimit %q, want r=%s", i, got, want)
		}
	}
	left := windowLeft()
	want := int64((left + time.Second - 1) / time.Second)

	resp := get(t, p.url("main", "/orders/2"), nil)
	if resp.StatusCode != 429 {
		t.Fatalf("request 6: status %d, want 429", resp.StatusCode)
	}
	if resp.Header.Get("X-Upstream") != "" {
		t.Errorf("request 6 reached the upstream")
	}
	ra, err := strconv.ParseInt(resp.Header.Get("Retry-After"), 10, 64)
	if err != nil || ra < want-1 || ra > want+1 || ra < 1 {
		t.Errorf("request 6: Retry-After %q, want the %d seconds left in the window (±1)", resp.Header.Get("Retry-After"), want)
	}
	var body httplimit.RejectedBody
	if err := json.Unmarshal([]byte(readBody(resp)), &body); err != nil || body.Error != "rate_limit_exceeded" || body.RetryAfter != ra || body.Message == "" {
		t.Errorf("request 6: body %+v (%v), want rate_limit_exceeded with retry_after %d", body, err, ra)
	}
	if resp.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("request 6: Cache-Control %q, want no-store", resp.Header.Get("Cache-Control"))
	}
	// One debug line per rejected request, none per allowed one; the
	// process writes its log a moment after the answer.
	eventually.True(t, 5*time.Second, "the rate-limited log line", func() bool { return strings.Count(p.log(), `"msg":"rate limited"`) > refused })
	if n := strings.Count(p.log(), `"msg":"rate limited"`) - refused; n != 1 {
		t.Errorf("%d rate-limited log lines, want exactly 1:\n%s", n, p.log())
	}
	if err := p.stop(t); err != nil {
		t.Errorf("serve exited with %v after SIGTERM, want status 0", err)
	}
}

func TestTwoServeProcessesOnOneRedisEnforceOneLimit(t *testing.T) {
	rdb := redistest.Single(t)
	up := upstream(t)
	cfg := writeConfig(t, `
classes:
  default:
    limits:
      default: {algorithm: sliding_log, rate: 10, period: 1m}
`)
	a := startServe(t, []string{"main"}, "--config", cfg, "--upstream", up.URL, "--redis-url", rdb.URL())
	b := startServe(t, []string{"main"}, "--config", cfg, "--upstream", up.URL, "--redis-url", rdb.URL())
	ok := 0
	for i := 0; i < 30; i++ {
		p := a
		if i%2 == 1 {
			p = b
		}
		resp := get(t, p.url("main", "/x"), map[string]string{})
		switch resp.StatusCode {
		case 200:
			ok++
		case 429:
		default:
			t.Fatalf("request %d: status %d: %s", i, resp.StatusCode, readBody(resp))
		}
	}
	if ok != 10 {
		t.Errorf("%d requests allowed across both processes, want exactly the limit of 10", ok)
	}
}

func TestReadyzReportsRedisAndFailsWhileItIsDownOnlyWhenStrict(t *testing.T) {
	rdb := redistest.Single(t)
	// Fail open (the default): ready while Redis is down, since decisions
	// are still made. ready_strict: unready, for instances to be pulled.
	lenient := startServe(t, []string{"main"}, "--redis-url", rdb.URL())
	strict := startServe(t, []string{"main"}, "--redis-url", rdb.URL(), "--config", writeConfig(t, "server: {ready_strict: true}\n"))
	waitReady := func(p *proc, want int, store string) {
		t.Helper()
		eventually.True(t, 10*time.Second, fmt.Sprintf("/readyz %d with store %s", want, store), func() bool {
			resp := get(t, p.url("main", "/readyz"), nil)
			body := readBody(resp)
			var rd struct {
				Ready      bool   `json:"ready"`
				Store      string `json:"store"`
				FailPolicy string `json:"fail_policy"`
			}
			_ = json.Unmarshal([]byte(body), &rd)
			return resp.StatusCode == want && rd.Store == store && rd.Ready == (want == 200) && rd.FailPolicy == "open"
		})
	}
	waitReady(lenient, 200, "up")
	waitReady(strict, 200, "up")
	rdb.Stop()
	waitReady(lenient, 200, "down")
	waitReady(strict, 503, "down")
	for _, p := range []*proc{lenient, strict} {
		if resp := get(t, p.url("main", "/healthz"), nil); resp.StatusCode != 200 {
			t.Errorf("/healthz %d while Redis is down, want 200: the process is up", resp.StatusCode)
		}
	}
	rdb.Start()
	waitReady(lenient, 200, "up")
	waitReady(strict, 200, "up")
}

func TestForwardedForIsBelievedOnlyFromATrustedProxy(t *testing.T) {
	up := upstream(t)
	limit := `
classes:
  default:
    limits:
      default: {algorithm: fixed_window, rate: 2, period: 1m}
`
	t.Run("from an untrusted peer a forged X-Forwarded-For is ignored", func(t *testing.T) {
		p := startServe(t, []string{"main"}, "--config", writeConfig(t, limit+"identity: {trusted_proxies: [10.0.0.0/8]}\n"), "--upstream", up.URL)
		codes := []int{}
		for i := 0; i < 3; i++ {
			codes = append(codes, get(t, p.url("main", "/"), map[string]string{"X-Forwarded-For": fmt.Sprintf("198.51.100.%d", i)}).StatusCode)
		}
		if fmt.Sprint(codes) != "[200 200 429]" {
			t.Errorf("statuses %v, want [200 200 429]: keyed by the real peer", codes)
		}
	})
	t.Run("from a trusted proxy the forwarded client is the key", func(t *testing.T) {
		p := startServe(t, []string{"main"}, "--config", writeConfig(t, limit+"identity: {trusted_proxies: [127.0.0.1/32]}\n"), "--upstream", up.URL)
		codes := []int{}
		for i := 0; i < 3; i++ {
			codes = append(codes, get(t, p.url("main", "/"), map[string]string{"X-Forwarded-For": fmt.Sprintf("198.51.100.%d", i)}).StatusCode)
		}
		for i := 0; i < 3; i++ {
			codes = append(codes, get(t, p.url("main", "/"), map[string]string{"X-Forwarded-For": "203.0.113.9"}).StatusCode)
		}
		if fmt.Sprint(codes) != "[200 200 200 200 200 429]" {
			t.Errorf("statuses %v, want three different clients allowed, then one client limited after 2", codes)
		}
	})
}

func TestReservedPathsAndListeners(t *testing.T) {
	up := upstream(t)
	t.Run("on one listener serve answers the reserved paths itself", func(t *testing.T) {
		p := startServe(t, []string{"main"}, "--upstream", up.URL)
		for _, path := range []string{"/metrics", "/healthz", "/readyz"} {
			resp := get(t, p.url("main", path), nil)
			if resp.StatusCode != 200 || resp.Header.Get("X-Upstream") != "" {
				t.Errorf("%s: status %d upstream=%q, want 200 from serve", path, resp.StatusCode, resp.Header.Get("X-Upstream"))
			}
		}
		if !strings.Contains(readBody(get(t, p.url("main", "/metrics"), nil)), "go_goroutines") {
			t.Errorf("/metrics does not look like Prometheus metrics")
		}
		resp, err := http.Post(p.url("main", "/v1/check"), "text/plain", strings.NewReader(`{"key":"k","endpoint":"GET /a"}`))
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("POST /v1/check: %v %v", resp, err)
		}
		resp.Body.Close()
	})
	t.Run("--metrics-listen moves /metrics, /healthz and /readyz to their own listener", func(t *testing.T) {
		p := startServe(t, []string{"main", "metrics"}, "--upstream", up.URL, "--metrics-listen", "127.0.0.1:0")
		for _, path := range []string{"/metrics", "/healthz", "/readyz"} {
			if resp := get(t, p.url("main", path), nil); resp.Header.Get("X-Upstream") != "yes" {
				t.Errorf("main %s: not proxied to the upstream (status %d)", path, resp.StatusCode)
			}
			if resp := get(t, p.url("metrics", path), nil); resp.StatusCode != 200 {
				t.Errorf("metrics listener %s: status %d, want 200", path, resp.StatusCode)
			}
		}
	})
	t.Run("the admin listener is off unless set", func(t *testing.T) {
		p := startServe(t, []string{"main"}, "--upstream", up.URL)
		if p.addrs["admin"] != "" {
			t.Errorf("an admin listener was opened without --admin-listen")
		}
		q := startServe(t, []string{"main", "admin"}, "--upstream", up.URL, "--admin-listen", "127.0.0.1:0")
		if q.addrs["admin"] == "" {
			t.Errorf("--admin-listen did not open the admin listener")
		}
	})
}

func TestSIGTERMDrainsInFlightRequests(t *testing.T) {
	up, arrived, release := slowUpstream(t)
	p := startServe(t, []string{"main"}, "--upstream", up.URL)
	type result struct {
		code int
		body string
		err  error
	}
	res := make(chan result, 1)
	go func() {
		resp, err := http.Get(p.url("main", "/slow"))
		if err != nil {
			res <- result{err: err}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		res <- result{code: resp.StatusCode, body: string(b)}
	}()
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the request never reached the upstream")
	}
	// SIGTERM while the upstream still works on the request: serve drains,
	// and must still be waiting for it, the answer not yet sent, until the
	// upstream is done.
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	within(t, 5*time.Second, "serve shutting down", func() bool {
		p.alive(t)
		return logCount(p, `"msg":"shutting down"`) == 1
	})
	select {
	case r := <-res:
		t.Fatalf("the in-flight request ended while the upstream still held it: %d %q %v", r.code, r.body, r.err)
	case <-p.done:
		t.Fatalf("serve exited while a request was in flight: %v", p.err)
	default:
	}
	release()
	if err := p.stop(t); err != nil {
		t.Errorf("serve exited with %v, want 0", err)
	}
	r := <-res
	if r.err != nil || r.code != 200 || !strings.Contains(r.body, "/slow") {
		t.Errorf("in-flight request: %d %q %v, want it completed with 200", r.code, r.body, r.err)
	}
}

func TestAnInvalidConfigStopsServeWithStatus1AndOneClearMessage(t *testing.T) {
	cfg := writeConfig(t, "classes: {default: {limits: {default: {algorithm: fixed_window, rate: 0, period: 1m}}}}\n")
	out, err := exec.Command(binary, "serve", "--config", cfg).CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 1 {
		t.Fatalf("exit %v, want status 1; output %s", err, out)
	}
	for _, want := range []string{cfg, "classes.default.limits.default.rate", "must be > 0"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output %q does not mention %q", out, want)
		}
	}
	out, err = exec.Command(binary, "serve", "--no-such-flag").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
		t.Errorf("an unknown flag: exit %v, want status 2; output %s", err, out)
	}
}
