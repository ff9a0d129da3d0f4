package server_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// hup sends SIGHUP to serve.
func (p *proc) hup(t *testing.T) {
	t.Helper()
	if err := syscall.Kill(p.cmd.Process.Pid, syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
}

// alive fails the test when serve has exited.
func (p *proc) alive(t *testing.T) {
	t.Helper()
	select {
	case <-p.done:
		t.Fatalf("serve exited: %v\n%s", p.err, p.log())
	default:
	}
}

// logCount counts the log lines of p holding every one of parts.
func logCount(p *proc, parts ...string) int {
	n := 0
	for _, l := range strings.Split(p.log(), "\n") {
		all := true
		for _, s := range parts {
			all = all && strings.Contains(l, s)
		}
		if all {
			n++
		}
	}
	return n
}

func rateConfig(rate int, extra string) string {
	return fmt.Sprintf("classes:\n  default:\n    limits:\n      default: {algorithm: fixed_window, rate: %d, period: 1m}\n%s", rate, extra)
}

func TestSIGHUPReloadsTheConfigWhileRequestsAreInFlightAndServeKeepsServing(t *testing.T) {
	// The upstream holds every request until the reload is done, so that
	// each one is in flight across it.
	var arrived atomic.Int64
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived.Add(1)
		<-release
		fmt.Fprintln(w, "ok")
	}))
	t.Cleanup(up.Close)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	// No file watch: the reload can only come from the signal.
	cfg := writeConfig(t, rateConfig(100, "reload: {watch: false}\n"))
	p := startServe(t, []string{"main"}, "--config", cfg, "--upstream", up.URL)
	if _, l := check(t, p, "k", "GET /x", ""); l != 100 {
		t.Fatalf("limit %d, want 100", l)
	}
	const inFlight = 40
	var wg sync.WaitGroup
	codes := make(chan int, inFlight)
	for i := 0; i < inFlight; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Get(p.url("main", fmt.Sprintf("/slow/%d", i)))
			if err != nil {
				codes <- -1
				return
			}
			resp.Body.Close()
			codes <- resp.StatusCode
		}()
	}
	within(t, 5*time.Second, "every request at the upstream", func() bool { return arrived.Load() == inFlight })
	if err := os.WriteFile(cfg, []byte(rateConfig(200, "reload: {watch: false}\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	p.hup(t)
	within(t, 5*time.Second, "the reload logged", func() bool {
		p.alive(t)
		return logCount(p, `"msg":"config reloaded"`, `"trigger":"SIGHUP"`, cfg) == 1
	})
	close(release)
	wg.Wait()
	close(codes)
	ok := 0
	for c := range codes {
		if c == 200 {
			ok++
		}
	}
	if ok != inFlight {
		t.Errorf("%d of %d in-flight requests succeeded across the SIGHUP", ok, inFlight)
	}
	p.alive(t)
	if _, l := check(t, p, "k2", "GET /x", ""); l != 200 {
		t.Errorf("limit %d after SIGHUP, want the new 200", l)
	}
	// A second SIGHUP of the same file reloads again and still does not end serve.
	p.hup(t)
	within(t, 5*time.Second, "the second reload", func() bool {
		return logCount(p, `"msg":"config reloaded"`, `"trigger":"SIGHUP"`) == 2
	})
	p.alive(t)
}

func TestAReloadThatWouldEmptyTheConfigIsRefusedAndTheOldLimitsKeepServing(t *testing.T) {
	const proxies = "identity: {trusted_proxies: [10.0.0.0/8]}\nreload: {interval: 200ms}\n"
	cfg := writeConfig(t, rateConfig(5, proxies))
	p := startServe(t, []string{"main"}, "--config", cfg)
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(cfg, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	for _, c := range []struct {
		name, content, want string
		hup                 bool
	}{
		{"an emptied file", "", "no keys", false},
		{"a file of comments, on SIGHUP", "# emptied by a deploy\n", "no keys", true},
		{"a file without classes", proxies, "classes: none in the file", false},
		{"another trusted proxy", rateConfig(5, "identity: {trusted_proxies: [0.0.0.0/0]}\nreload: {interval: 200ms}\n"), "identity.trusted_proxies: changed", true},
	} {
		// The watch may see the edit before the signal: both reload.
		n++
		before := logCount(p, "config reload rejected", c.want)
		write(c.content)
		if c.hup {
			p.hup(t)
		}
		trigger := `"trigger":"file change"`
		if c.hup {
			trigger = `"trigger":"SIGHUP"`
		}
		within(t, 5*time.Second, c.name+" refused", func() bool {
			return logCount(p, `"level":"ERROR"`, "config reload rejected", cfg, c.want, trigger) >= 1 &&
				logCount(p, "config reload rejected", c.want) > before
		})
		if _, l := check(t, p, fmt.Sprint("k", n), "GET /x", ""); l != 5 {
			t.Errorf("%s: limit %d, want the old 5 still in force", c.name, l)
		}
	}
	if v := metric(t, p, `rate_limit_config_reloads_total{result="success"}`); v != 0 {
		t.Errorf("reloads success = %v, want 0", v)
	}
	if v := metric(t, p, `rate_limit_config_reloads_total{result="error"}`); v < 4 {
		t.Errorf("reloads error = %v, want at least the 4 refused", v)
	}
	write(rateConfig(7, proxies))
	within(t, 5*time.Second, "a valid edit applied", func() bool { n++; _, l := check(t, p, fmt.Sprint("v", n), "GET /x", ""); return l == 7 })
	p.alive(t)
}

func TestARevokedAdminTokenStopsWorkingAfterAReload(t *testing.T) {
	const oldToken, newToken = "old-0123456789abcdef", "new-0123456789abcdef"
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte("ops read-write "+oldToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "rl.yaml")
	if err := os.WriteFile(cfg, []byte(rateConfig(5, "admin: {tokens_file: tokens}\nreload: {interval: 200ms}\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startServe(t, []string{"main", "admin"}, "--config", cfg, "--admin-listen", "127.0.0.1:0")
	if code, body, _ := adminCall(t, p, "GET", "/admin/v1/limits", oldToken, ""); code != 200 {
		t.Fatalf("the configured token: %d %s", code, body)
	}
	if err := os.WriteFile(tokens, []byte("ops2 read-write "+newToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p.hup(t)
	within(t, 5*time.Second, "the reload", func() bool { return logCount(p, `"msg":"config reloaded"`, `"trigger":"SIGHUP"`) == 1 })
	if code, _, _ := adminCall(t, p, "GET", "/admin/v1/limits", oldToken, ""); code != 401 {
		t.Errorf("the revoked token after the reload: %d, want 401", code)
	}
	if code, body, _ := adminCall(t, p, "GET", "/admin/v1/limits", newToken, ""); code != 200 {
		t.Errorf("the new token after the reload: %d %s, want 200", code, body)
	}
	// A change of the config file reads the tokens file again too.
	if err := os.WriteFile(tokens, []byte("ops read-write "+oldToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte(rateConfig(6, "admin: {tokens_file: tokens}\nreload: {interval: 200ms}\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	within(t, 5*time.Second, "the file change", func() bool {
		return logCount(p, `"msg":"config reloaded"`, `"trigger":"file change"`) == 1
	})
	if code, _, _ := adminCall(t, p, "GET", "/admin/v1/limits", newToken, ""); code != 401 {
		t.Errorf("the token revoked by the file change: %d, want 401", code)
	}
	if code, _, _ := adminCall(t, p, "GET", "/admin/v1/limits", oldToken, ""); code != 200 {
		t.Errorf("the token added back by the file change: %d, want 200", code)
	}
}

func TestSecretFilesReadableByOthersAreWarnedOfOrRefusedWithStrictSecrets(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte("ops read-write old-0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(tokens, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "rl.yaml")
	if err := os.WriteFile(cfg, []byte(rateConfig(5, "admin: {tokens_file: tokens}\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startServe(t, []string{"main"}, "--config", cfg)
	if logCount(p, `"level":"WARN"`, "admin.tokens_file", tokens, "mode 0644") != 1 {
		t.Errorf("no warning naming the key, the file and its mode:\n%s", p.log())
	}
	if err := p.stop(t); err != nil {
		t.Fatal(err)
	}
	out, err := execServe(t, "--config", cfg, "--strict-secrets")
	if code := exitCode(err); code != 1 || !strings.Contains(out, "admin.tokens_file") || !strings.Contains(out, tokens) || !strings.Contains(out, "mode 0644") {
		t.Errorf("serve --strict-secrets with the file at 0644: exit %d, want 1 naming the key, the file and its mode:\n%s", code, out)
	}
	if err := os.Chmod(tokens, 0o600); err != nil {
		t.Fatal(err)
	}
	strict := startServe(t, []string{"main"}, "--config", cfg, "--strict-secrets")
	if strings.Contains(strict.log(), "tokens_file") {
		t.Errorf("a file at 0600 drew a warning:\n%s", strict.log())
	}
}

// execServe runs serve on free ports until it exits (within 20s) and
// returns what it wrote.
func execServe(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// exitCode is the exit status of a finished command's error (0 for nil).
func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

func TestSIGHUPReloadsTheRLSDirectoryAndRefusesAnEmptiedOne(t *testing.T) {
	dir := t.TempDir()
	domain := filepath.Join(dir, "shop.yaml")
	writeDomain := func(n int) {
		t.Helper()
		if err := os.WriteFile(domain, []byte(fmt.Sprintf(grpcDomain, n)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeDomain(2)
	cfg := writeConfig(t, rateConfig(5, fmt.Sprintf("reload: {watch: false}\nrls: {config_dir: %q}\n", dir)))
	p := startServe(t, []string{"main", "grpc"}, "--config", cfg, "--grpc-listen", "127.0.0.1:0")
	writeDomain(9)
	p.hup(t)
	within(t, 5*time.Second, "the rls reload", func() bool {
		p.alive(t)
		return logCount(p, `"msg":"rls config reloaded"`, `"shop"`) == 1
	})
	if err := os.Remove(domain); err != nil {
		t.Fatal(err)
	}
	p.hup(t)
	within(t, 5*time.Second, "the emptied directory refused", func() bool {
		return logCount(p, `"level":"ERROR"`, "rls config reload failed", dir, "no domain file") == 1
	})
	if n := logCount(p, `"msg":"rls config reloaded"`); n != 1 {
		t.Errorf("%d rls reloads applied, want 1", n)
	}
	p.alive(t)
}
