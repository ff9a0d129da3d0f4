package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckExplainsAConcurrencyLimit(t *testing.T) {
	file := filepath.Join(t.TempDir(), "rl.yaml")
	if err := os.WriteFile(file, []byte("tiers: {names: [free, pro], default: free}\nclasses: {default: {limits: {free: {algorithm: concurrency, limit: 5, lease_ttl: 2s}, pro: {algorithm: gcra, rate: 9, period: 1s}}}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"check", "--config", file}, nil, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	want := "default/free: concurrency, at most 5 requests in flight per key, per instance: the memory store holds each instance's own leases; a lease never given back (a crashed instance) frees its slot after lease_ttl 2s"
	if !strings.Contains(out.String(), want) || strings.Contains(out.String(), "default/pro: concurrency") {
		t.Fatalf("check printed %q, want the free tier's line %q alone", out.String(), want)
	}
}
