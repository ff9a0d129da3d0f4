package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
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
