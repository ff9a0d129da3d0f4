package config

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/eventually"
	"github.com/rl-exporter/rl-exporter/limiter"
)

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPrecedenceIsDefaultsThenFileThenEnvironmentThenFlags(t *testing.T) {
	file := writeFile(t, t.TempDir(), "rl.yaml", `
server: {listen: "127.0.0.1:1001", metrics_listen: "127.0.0.1:2001", admin_listen: "127.0.0.1:3001"}
store: {timeout: 250ms}
`)
	env := []string{
		"HOME=/root", // not ours: ignored
		"RL_SERVER__METRICS_LISTEN=127.0.0.1:2002",
		"RL_SERVER__ADMIN_LISTEN=127.0.0.1:3002",
		"RL_STORE__REDIS__POOL_SIZE=7",
		"RL_METRICS__NATIVE_HISTOGRAMS=true",
		"RL_IDENTITY__TRUSTED_PROXIES=10.0.0.0/8, 192.168.0.0/16",
		"RL_IDENTITY__TRUSTED_HEADER_PEERS=127.0.0.1,::1",
		"RL_CLASSES__DEFAULT__LIMITS__DEFAULT__RATE=42",
		"RL_CLASSES__DEFAULT__LIMITS__DEFAULT__ALGORITHM=gcra",
		"RL_CLASSES__DEFAULT__LIMITS__DEFAULT__PERIOD=1s",
	}
	flags := []Override{{Key: "server.admin_listen", Value: "127.0.0.1:3003", From: "--admin-listen"}}
	c, err := Sources{File: file, Env: env, Flags: flags}.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range []struct{ what, got, want string }{
		{"listen (file only)", c.Server.Listen, "127.0.0.1:1001"},
		{"metrics_listen (file < env)", c.Server.MetricsListen, "127.0.0.1:2002"},
		{"admin_listen (file < env < flag)", c.Server.AdminListen, "127.0.0.1:3003"},
		{"store.timeout (file over default)", c.Store.Timeout.String(), "250ms"},
		{"store.fail_policy (default)", c.Store.FailPolicy, "open"},
		{"pool_size (env int)", fmt.Sprint(c.Store.Redis.PoolSize), "7"},
		{"native_histograms (env bool)", fmt.Sprint(c.Metrics.NativeHistograms), "true"},
		{"trusted_proxies (env list)", fmt.Sprint(c.Identity.TrustedProxies), "[10.0.0.0/8 192.168.0.0/16]"},
		{"trusted_header_peers (env list)", fmt.Sprint(c.Identity.TrustedHeaderPeers), "[127.0.0.1 ::1]"},
		{"a class limit (env map key)", fmt.Sprint(c.Classes["default"].Limits["default"].Limiter()), fmt.Sprint(limiter.Limit{Algorithm: limiter.GCRA, Rate: 42, Period: time.Second})},
	} {
		if g.got != g.want {
			t.Errorf("%s = %q, want %q", g.what, g.got, g.want)
		}
	}
}

func TestBadEnvironmentVariablesAreNamed(t *testing.T) {
	for _, c := range []struct{ name, env string }{
		{"an unknown key", "RL_STORE__TIMOUT=1s"},
		{"a wrong type", "RL_STORE__REDIS__POOL_SIZE=many"},
		{"a bad duration", "RL_STORE__TIMEOUT=soon"},
		{"a section", "RL_STORE=redis"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Sources{Env: []string{c.env}}.Load()
			name, _, _ := strings.Cut(c.env, "=")
			if err == nil || !strings.Contains(err.Error(), name) {
				t.Errorf("error %v, want one naming %s", err, name)
			}
		})
	}
}

func TestAnInvalidValueFromTheEnvironmentOrAFlagNamesWhereItCameFrom(t *testing.T) {
	_, err := Sources{Env: []string{"RL_STORE__FAIL_POLICY=maybe"}}.Load()
	if err == nil || !strings.Contains(err.Error(), "store.fail_policy") || !strings.Contains(err.Error(), "RL_STORE__FAIL_POLICY") {
		t.Errorf("error %v, want the key and the variable", err)
	}
	_, err = Sources{Flags: []Override{{Key: "server.listen", Value: "nowhere", From: "--listen"}}}.Load()
	if err == nil || !strings.Contains(err.Error(), "server.listen") || !strings.Contains(err.Error(), "--listen") {
		t.Errorf("error %v, want the key and the flag", err)
	}
	_, err = Sources{Flags: []Override{
		{Key: "store.type", Value: "redis", From: "--redis-url"},
		{Key: "store.redis.url", Value: "http://user:s3cret@127.0.0.1:1", From: "--redis-url"},
	}}.Load()
	if err == nil || !strings.Contains(err.Error(), "store.redis.url: ") || !strings.Contains(err.Error(), "(set by --redis-url") {
		t.Errorf("error %v, want the key store.redis.url and the flag", err)
	}
	if err != nil && strings.Contains(err.Error(), "s3cret") {
		t.Errorf("error %v shows the password in the URL", err)
	}
}

func TestSecretsNeverShowInFormattedOrLoggedOutput(t *testing.T) {
	c, err := Sources{Env: []string{"RL_STORE__REDIS__PASSWORD=hunter2hunter2", "RL_ADMIN__TOKENS=ops:read-write:0123456789abcdef-secret"}}.Load()
	if err != nil {
		t.Fatal(err)
	}
	if c.Store.Redis.Password.Reveal() != "hunter2hunter2" {
		t.Fatalf("password %q not loaded", c.Store.Redis.Password.Reveal())
	}
	var logged strings.Builder
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("config", "redis", c.Store.Redis, "admin", c.Admin)
	js, _ := json.Marshal(c)
	for _, out := range []string{fmt.Sprintf("%v %+v %#v", c, c, c), logged.String(), string(js)} {
		if strings.Contains(out, "hunter2") || strings.Contains(out, "0123456789abcdef") {
			t.Errorf("a secret shows in %s", out)
		}
	}
	toks, err := c.AdminTokens()
	if err != nil || len(toks) != 1 || toks[0].Name != "ops" || toks[0].Role != RoleReadWrite {
		t.Errorf("tokens %+v, %v", toks, err)
	}
}

func TestAdminTokenFilesAreCheckedWithoutShowingTheToken(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ name, content, want string }{
		{"a missing field", "ops read-write\n", "line 1"},
		{"an unknown role", "# comment\nops admin 0123456789abcdef-tok\n", "line 2"},
		{"a short token", "ops read-only short\n", "shorter than 16"},
		{"a name used twice", "a read-only 0123456789abcdef-one\na read-only 0123456789abcdef-two\n", "used twice"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := writeFile(t, dir, "tokens", c.content)
			_, err := Parse(filepath.Join(dir, "rl.yaml"), []byte("admin: {tokens_file: tokens}\n"))
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "admin") {
				t.Fatalf("error %v, want one with %q", err, c.want)
			}
			if strings.Contains(err.Error(), "0123456789abcdef") {
				t.Errorf("the error shows a token: %v", err)
			}
			_ = f
		})
	}
	writeFile(t, dir, "tokens", "# name role token\nops read-write 0123456789abcdef-rw\ngrafana read-only 0123456789abcdef-ro\n")
	c, err := Parse(filepath.Join(dir, "rl.yaml"), []byte("admin: {tokens_file: tokens}\n"))
	if err != nil {
		t.Fatal(err)
	}
	toks, _ := c.AdminTokens()
	if len(toks) != 2 || toks[1].Name != "grafana" || toks[1].Role != RoleReadOnly {
		t.Errorf("tokens %+v", toks)
	}
}

func TestRestartRequiredNamesWhatAReloadCannotApply(t *testing.T) {
	old := Default()
	nw := Default()
	nw.Server.Listen = "127.0.0.1:9"
	nw.Store.Redis.URL = "redis://x:1"
	nw.Headers.Legacy = true                   // reloadable
	nw.Classes = map[string]Class{"other": {}} // reloadable
	got := fmt.Sprint(RestartRequired(old, nw))
	if got != "[server.listen store.redis]" {
		t.Errorf("RestartRequired = %s", got)
	}
	if got := RestartRequired(old, Default()); len(got) != 0 {
		t.Errorf("RestartRequired of equal configs = %v", got)
	}
}

func TestTheExampleConfigIsValidAndShowsEverySection(t *testing.T) {
	c, err := Load("../config.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("../config.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, section := range []string{"server:", "log:", "store:", "tiers:", "identity:", "headers:", "classes:", "metrics:", "tracing:", "admin:", "live:", "reload:"} {
		if !strings.Contains(string(b), "\n"+section) {
			t.Errorf("config.example.yaml has no %s section", section)
		}
	}
	if len(c.Classes) < 2 || len(c.Tiers.Names) < 2 {
		t.Errorf("the example has %d classes and %d tiers; show several", len(c.Classes), len(c.Tiers.Names))
	}
}

func TestWatchSeesAnEditAndARemovedAndRecreatedFile(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, dir, "rl.yaml", "log: {level: info}\n")
	var changes, ticks atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		// Since the content written above, so that an edit made before
		// the watch first reads the file is a change all the same.
		Watch(ctx, WatchConfig{Path: path, Interval: 300 * time.Millisecond, Since: sha256.Sum256([]byte("log: {level: info}\n")),
			tick: func() { ticks.Add(1) }}, func() { changes.Add(1) })
		close(done)
	}()
	defer func() { cancel(); <-done }()
	// aCheckPasses waits until a periodic check has run from start to end
	// after the call: the second tick from now follows a whole check.
	aCheckPasses := func() {
		t.Helper()
		from := ticks.Load()
		eventually.True(t, 5*time.Second, "a whole content check", func() bool { return ticks.Load() >= from+2 })
	}
	wait := func(want int32) {
		t.Helper()
		eventually.True(t, 5*time.Second, fmt.Sprintf("%d changes seen", want), func() bool { return changes.Load() >= want })
		if got := changes.Load(); got != want {
			t.Fatalf("%d changes seen, want %d", got, want)
		}
	}
	writeFile(t, dir, "rl.yaml", "log: {level: debug}\n")
	wait(1)
	// Same content again: no change.
	writeFile(t, dir, "rl.yaml", "log: {level: debug}\n")
	// The checks that follow see no change in the same content.
	aCheckPasses()
	wait(1)
	// Removed, then created with new content (what some editors do).
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	// The file stays missing a while, as between an editor's removal and
	// its write: the watch must not count the absence as a change, for a
	// whole check at least.
	aCheckPasses()
	writeFile(t, dir, "rl.yaml", "log: {level: warn}\n")
	wait(2)
	// Replaced by a rename, as most editors and ConfigMaps do.
	tmp := writeFile(t, dir, ".rl.yaml.tmp", "log: {level: error}\n")
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	wait(3)
}

func TestAnEditMadeBetweenTheLoadAndTheWatchIsApplied(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, dir, "rl.yaml", "log: {level: info}\n")
	loaded, err := Sources{File: path}.Load()
	if err != nil {
		t.Fatal(err)
	}
	// The file changes after it was loaded and before the watch starts
	// (serve starts its watch on a goroutine of its own, later).
	writeFile(t, dir, "rl.yaml", "log: {level: debug}\n")
	// An hour between checks: only the start can see the edit.
	changes := watchChanges(t, WatchConfig{Path: path, Interval: time.Hour, Since: loaded.Digest})
	select {
	case <-changes:
	case <-time.After(5 * time.Second):
		t.Fatal("the edit made before the watch started was never seen as a change")
	}
	// The content it loaded, unchanged, is not a change.
	unchanged := writeFile(t, t.TempDir(), "same.yaml", "log: {level: info}\n")
	again, err := Sources{File: unchanged}.Load()
	if err != nil {
		t.Fatal(err)
	}
	quiet := watchChanges(t, WatchConfig{Path: unchanged, Interval: time.Hour, Since: again.Digest})
	select {
	case <-quiet:
		t.Error("a file with the content that was loaded was taken for a change")
	case <-time.After(300 * time.Millisecond):
	}
	if again.Digest == ([32]byte{}) || again.Digest != loaded.Digest {
		t.Errorf("digests %x and %x of two files with the same content: want their SHA-256, equal", again.Digest, loaded.Digest)
	}
}

// watchChanges runs Watch with w until the test ends and returns a
// channel that receives once per change it reports.
func watchChanges(t *testing.T, w WatchConfig) <-chan struct{} {
	t.Helper()
	changes := make(chan struct{}, 4)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		Watch(ctx, w, func() { changes <- struct{}{} })
		close(done)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return changes
}

func TestAnEnvironmentOverrideMergesIntoTheBuiltInClassAsIntoAFile(t *testing.T) {
	file := writeFile(t, t.TempDir(), "rl.yaml", `
classes:
  default:
    limits:
      default: {algorithm: fixed_window, rate: 100, period: 1m}
`)
	noClasses := writeFile(t, t.TempDir(), "rl.yaml", "tiers: {default: free}\n")
	for _, tc := range []struct {
		name, file, tier string
	}{
		{"without a file, the built-in class keeps its algorithm and period", "", "default"},
		{"with a file writing the same class, the result is the same", file, "default"},
		{"with a file that names no class, the built-in class on its default tier", noClasses, "free"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := []string{"RL_CLASSES__DEFAULT__LIMITS__" + strings.ToUpper(tc.tier) + "__RATE=3"}
			c, err := Sources{File: tc.file, Env: env}.Load()
			if err != nil {
				t.Fatal(err)
			}
			got := c.Classes["default"].Limits[tc.tier]
			want := Limit{Algorithm: "fixed_window", Rate: 3, Period: time.Minute}
			if !reflect.DeepEqual(got, want) || len(c.Classes) != 1 {
				t.Errorf("classes = %+v, want only default with %+v", c.Classes, want)
			}
		})
	}
}
