package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckExplainsAPenaltyBox(t *testing.T) {
	file := filepath.Join(t.TempDir(), "rl.yaml")
	cfg := "classes:\n" +
		"  default:\n    limits: {default: {algorithm: fixed_window, rate: 5, period: 1m}}\n    penalty: {after: 3, within: 1m, for: 10m}\n" +
		"  quiet:\n    limits: {default: {algorithm: fixed_window, rate: 5, period: 1m}}\n"
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"check", "--config", file}, nil, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	want := "default: penalty box, a key refused 3 times within 1m0s is refused for 10m0s (429, status penalized), per instance: the memory store holds each instance's own box; the admin key reset lifts it"
	if !strings.Contains(out.String(), want) || strings.Contains(out.String(), "quiet: penalty box") {
		t.Fatalf("check printed %q, want the default class's line %q alone", out.String(), want)
	}
}

func TestCheckSaysAPenaltyWithoutWithinCountsOverTheDefaultTiersPeriod(t *testing.T) {
	file := filepath.Join(t.TempDir(), "rl.yaml")
	cfg := "tiers: {names: [free, pro], default: free}\n" +
		"classes:\n  default:\n    limits:\n      free: {algorithm: fixed_window, rate: 5, period: 1m}\n      pro: {algorithm: gcra, rate: 50, period: 10s}\n" +
		"    penalty: {after: 3, for: 10m}\n"
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"check", "--config", file}, nil, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	want := "default: penalty box, a key refused 3 times within 1m0s (penalty.within unset: the period of the free tier's limit) is refused for 10m0s"
	if !strings.Contains(out.String(), want) {
		t.Fatalf("check printed %q, want %q", out.String(), want)
	}
}
