package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rl-exporter/rl-exporter/slo"
)

// pathWithAmtool is an environment whose PATH holds the real amtool
// (Debian package prometheus-alertmanager, installed by `make deps`).
func pathWithAmtool(t *testing.T) environ {
	t.Helper()
	p, err := exec.LookPath("amtool")
	if err != nil {
		t.Fatal("amtool is not installed; run `make deps` (Debian package prometheus-alertmanager)")
	}
	return environ{"PATH=" + filepath.Dir(p)}
}

func TestAmtoolAcceptsTheGeneratedConfigAndRefusesABrokenOne(t *testing.T) {
	env := pathWithAmtool(t)
	m, err := slo.LoadFile(rulesTestSpec)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := m.Alertmanager()
	if err != nil {
		t.Fatal(err)
	}
	var good bytes.Buffer
	if err := slo.WriteAlertmanager(&good, cfg, "slo.yaml"); err != nil {
		t.Fatal(err)
	}
	if err := checkWithAmtool(context.Background(), env, good.Bytes()); err != nil {
		t.Errorf("amtool refuses the generated configuration: %v", err)
	}
	cfg.Route.Routes[0].Receiver = "nobody"
	var bad bytes.Buffer
	if err := slo.WriteAlertmanager(&bad, cfg, "slo.yaml"); err != nil {
		t.Fatal(err)
	}
	err = checkWithAmtool(context.Background(), env, bad.Bytes())
	if err == nil || !strings.Contains(err.Error(), "nobody") {
		t.Errorf("checkWithAmtool = %v, want amtool's error naming the undefined receiver", err)
	}
}

func TestRulesChecksTheAlertmanagerConfigWithAmtoolWhenInstalled(t *testing.T) {
	env := pathWithAmtool(t)
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"rules", "--spec", rulesTestSpec, "--check"}, env, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr.String())
	}
	if stderr.Len() != 0 {
		t.Errorf("stderr not empty with amtool installed:\n%s", stderr.String())
	}
}

func TestRulesSaysWhenAmtoolIsMissing(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"rules", "--spec", rulesTestSpec, "--check"}, environ{"PATH=" + t.TempDir()}, &out, &errOut)
	stdout, stderr := out.String(), errOut.String()
	if code != exitOK {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	if !strings.Contains(stdout, "valid") {
		t.Errorf("stdout = %q", stdout)
	}
	want := "note: " + slo.AlertmanagerPath + " not checked with Alertmanager's loader: amtool not found on PATH"
	if !strings.Contains(stderr, want) {
		t.Errorf("stderr lacks %q:\n%s", want, stderr)
	}
}

func TestFindAmtoolLooksOnlyForAnExecutableOnTheGivenPath(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "amtool"), []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := findAmtool(environ{"PATH=" + dir}); !errors.Is(err, errNoAmtool) {
		t.Errorf("a file that is not executable was found: %v", err)
	}
	if err := os.Chmod(filepath.Join(dir, "amtool"), 0o755); err != nil {
		t.Fatal(err)
	}
	if p, err := findAmtool(environ{"PATH=" + dir}); err != nil || p != filepath.Join(dir, "amtool") {
		t.Errorf("findAmtool = %q, %v", p, err)
	}
}
