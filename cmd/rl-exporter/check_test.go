package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rl-exporter/rl-exporter/config"
)

func TestCheckExitsZeroOneOrTwo(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("store: {timout: 1s}\nclasses: {default: {limits: {default: {algorithm: magic, rate: 0, period: 1m}}}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	asyncCost := filepath.Join(dir, "async-cost.yaml")
	if err := os.WriteFile(asyncCost, []byte(`store: {type: redis, redis: {url: "redis://127.0.0.1:1"}}
region: {name: a, peers: {b: {url: "redis://127.0.0.1:2"}}}
classes:
  chat:
    cost_from: {json: usage.total_tokens}
    region_mode: async
    limits: {default: {algorithm: fixed_window, rate: 1000, period: 1m}}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name       string
		args       []string
		want       int
		out, inErr string
	}{
		{"the example config", []string{"check", "--config", "../../config.example.yaml"}, 0, "valid", ""},
		{"the demo config", []string{"check", "--config", "../../examples/demo.yaml"}, 0, "valid", ""},
		{"the LLM cost config", []string{"check", "--config", "../../examples/llm-cost.yaml"}, 0, "valid", ""},
		{"the OpenAI-style recipe", []string{"check", "--config", "../../examples/openai-style.yaml"}, 0,
			"chat/tier1 monthly: fixed_window 50000000 per month in UTC, scope header X-Org-ID, unit cost", ""},
		{"cost_from on a region_mode that cannot hold reservations", []string{"check", "--config", asyncCost}, 1, "",
			"classes.chat.limits.default.region_mode: async decides on a local copy"},
		{"an invalid config", []string{"check", "--config", bad}, 1, "", "timout"},
		{"a missing file", []string{"check", "--config", filepath.Join(dir, "none.yaml")}, 1, "", "none.yaml"},
		{"no --config", []string{"check"}, 2, "", "--config FILE is required"},
		{"an unknown flag", []string{"check", "--nope"}, 2, "", "nope"},
		{"an extra argument", []string{"check", "--config", bad, "x"}, 2, "", "no arguments"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			got := run(context.Background(), c.args, nil, &out, &errb)
			if got != c.want {
				t.Fatalf("exit %d, want %d; stdout %q stderr %q", got, c.want, out.String(), errb.String())
			}
			if !strings.Contains(out.String(), c.out) || !strings.Contains(errb.String(), c.inErr) {
				t.Errorf("stdout %q stderr %q, want %q and %q", out.String(), errb.String(), c.out, c.inErr)
			}
		})
	}
}

func TestCheckAndServeReportEveryProblemOnItsOwnIndentedLine(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("server: {listn: \":8080\"}\nclasses: {api: {limits: {default: {algorithm: gcrb, rate: -1, period: 1s}}}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"check", "serve"} {
		t.Run(cmd, func(t *testing.T) {
			var out, errb bytes.Buffer
			if got := run(context.Background(), []string{cmd, "--config", bad}, nil, &out, &errb); got != exitFailure {
				t.Fatalf("exit %d, want %d; stderr %q", got, exitFailure, errb.String())
			}
			lines := strings.Split(strings.TrimSuffix(errb.String(), "\n"), "\n")
			want := []string{
				"rl-exporter " + cmd + ": " + bad + " is invalid (3 problem(s)):",
				"  config " + bad + ": server.listn: unknown key",
				"  config " + bad + ": classes.api.limits.default.algorithm: unknown algorithm \"gcrb\"",
				"  config " + bad + ": classes.api.limits.default.rate: must be > 0, got -1",
			}
			if len(lines) != len(want) {
				t.Fatalf("stderr has %d lines, want %d:\n%s", len(lines), len(want), errb.String())
			}
			for i, w := range want {
				if !strings.HasPrefix(lines[i], w) {
					t.Errorf("line %d = %q, want it to start with %q", i+1, lines[i], w)
				}
			}
		})
	}
}

func TestCheckWarnsOfASecretFileReadableByOthersAndRefusesItWithStrictSecrets(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte("ops read-write 0123456789abcdef-rw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "rl.yaml")
	if err := os.WriteFile(conf, []byte("admin: {tokens_file: tokens}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	checkWith := func(args ...string) (int, string) {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), append([]string{"check", "--config", conf}, args...), nil, &stdout, &stderr)
		return code, stderr.String()
	}
	if err := os.Chmod(tokens, 0o644); err != nil {
		t.Fatal(err)
	}
	named := func(s string) bool {
		return strings.Contains(s, "admin.tokens_file") && strings.Contains(s, tokens) && strings.Contains(s, "mode 0644")
	}
	if code, out := checkWith(); code != exitOK || !strings.Contains(out, "warning") || !named(out) {
		t.Errorf("check at 0644: exit %d, stderr %q; want 0 and a warning naming the key, the file and its mode", code, out)
	}
	if code, out := checkWith("--strict-secrets"); code != exitFailure || !named(out) {
		t.Errorf("check --strict-secrets at 0644: exit %d, stderr %q; want 1 naming the key, the file and its mode", code, out)
	}
	if err := os.Chmod(tokens, 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out := checkWith("--strict-secrets"); code != exitOK || out != "" {
		t.Errorf("check --strict-secrets at 0600: exit %d, stderr %q; want 0 and nothing", code, out)
	}
}

func TestCheckPrintDefaultsPrintsEveryDefaultAsAFileThatParsesBackIntoThem(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"check", "--print-defaults"}, nil, &out, &errb); code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, errb.String())
	}
	path := filepath.Join(t.TempDir(), "defaults.yaml")
	if err := os.WriteFile(path, out.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	printed, err := config.Load(path)
	if err != nil {
		t.Fatalf("the printed defaults do not load: %v\n%s", err, out.String())
	}
	if printed.Server.ShutdownTimeout != config.DefaultShutdownTimeout || printed.RLS.MaxDescriptors != config.Defaults().RLS.MaxDescriptors {
		t.Errorf("the printed defaults load as server %+v, rls %+v", printed.Server, printed.RLS)
	}
	for _, key := range []string{"server:", "shutdown_timeout: 15s", "store:", "fail_policy: open", "rls:", "max_descriptors: 32"} {
		if !strings.Contains(out.String(), key) {
			t.Errorf("the printed defaults lack %q:\n%s", key, out.String())
		}
	}
}

// TestCheckPrintDefaultsPrintsTheRecordedDefaults holds the printed
// defaults to testdata/print-defaults.yaml, so that moving where a default
// is declared cannot change one unseen. A default changed on purpose is
// recorded there with it.
func TestCheckPrintDefaultsPrintsTheRecordedDefaults(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"check", "--print-defaults"}, nil, &out, &errb); code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, errb.String())
	}
	want, err := os.ReadFile(filepath.Join("testdata", "print-defaults.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := range max(len(gl), len(wl)) {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("check --print-defaults differs from testdata/print-defaults.yaml at line %d: %q, want %q", i+1, g, w)
			}
		}
	}
}

func TestCheckNamesTenMistakesInOneRunEachWithItsKeyAndWhatWasMeant(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "ten.yaml")
	if err := os.WriteFile(bad, []byte(`server:
  listn: "127.0.0.1:8480"
store:
  type: reddis
tiers:
  names: [free, pro]
  default: free
default_class: chatt
identity:
  trusted_proxies: ["10.0.0.0/33"]
classes:
  chat:
    routes: ["POST /v1/chat"]
    penalty: {after: 3, for: 10m}
    limits:
      free: {algorithm: fixed_window, rate: 10, period: 1 minute}
      pro: {algorithm: token-bucket, rate: 100, period: 1m}
      gold: {algorithm: gcra, rate: 1000, period: 1m}
  search:
    routes: ["GET /v1/search"]
    limits:
      free: {algoritm: gcra, rate: 5, period: 1s}
      pro: {algorithm: gcra, rate: 0, period: 1s}
  docs:
    routes: ["GET /docs/{path...}"]
  limits:
    free: {algorithm: fixed_window, rate: 100, period: 1m}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"check", "--config", bad}, nil, &out, &errb); code != exitFailure {
		t.Fatalf("exit %d, want %d; stderr:\n%s", code, exitFailure, errb.String())
	}
	prefix := "  config " + bad + ": "
	want := []string{
		"server.listn: unknown key; did you mean listen?",
		`store.type: "reddis": want memory or redis; did you mean redis?`,
		`default_class: "chatt" is not a class (classes are [chat docs search]); did you mean chat?`,
		`identity.trusted_proxies[0]: "10.0.0.0/33" is not a CIDR or an IP address`,
		`classes.chat.limits.free.period: "1 minute" is neither a Go duration (such as 1m, 24h) nor day, week, month or year; did you mean 1m?`,
		`classes.chat.limits.pro.algorithm: unknown algorithm "token-bucket" (want one of fixed_window, sliding_log, sliding_window, token_bucket, leaky_bucket, gcra); did you mean token_bucket?`,
		"classes.chat.limits.gold: unknown tier (tiers.names is [free pro])",
		"classes.search.limits.free.algoritm: unknown key; did you mean algorithm?",
		"classes.search.limits.pro.rate: must be > 0, got 0",
		"classes.limits: a class's limits block directly under classes, where class names go, is not taken for a class; indented one level too shallow? classes.docs has no limits: did you mean classes.docs.limits?",
	}
	lines := strings.Split(strings.TrimSuffix(errb.String(), "\n"), "\n")
	if head := "rl-exporter check: " + bad + " is invalid (10 problem(s)):"; lines[0] != head {
		t.Errorf("first line %q, want %q", lines[0], head)
	}
	if len(lines) != len(want)+1 {
		t.Errorf("%d problems, want one line for each of the %d mistakes:\n%s", len(lines)-1, len(want), errb.String())
	}
	for _, w := range want {
		if !slices.Contains(lines, prefix+w) {
			t.Errorf("no line %q in:\n%s", prefix+w, errb.String())
		}
	}
}
