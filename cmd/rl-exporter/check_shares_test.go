package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckStatesTheSharesBound(t *testing.T) {
	file := filepath.Join(t.TempDir(), "rl.yaml")
	yaml := `store: {type: redis, redis: {url: "redis://127.0.0.1:1"}}
tiers: {names: [free, pro], default: free}
classes:
  api:
    shares: {enabled: true}
    limits:
      free: {algorithm: gcra, rate: 1000, period: 1s}
      pro: {algorithm: fixed_window, rate: 50, period: 1m}
`
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"check", "--config", file}, nil, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, want := range []string{
		"api/free: shares every 100ms, chunks of up to 100 units per key and replica (a tenth of 1000); beyond the rule, a span of time admits at most the 100 units per key each replica may hold at its start",
		"api/pro: shares every 100ms, chunks of up to 5 units per key and replica (a tenth of 50); nothing beyond the rule",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("check printed\n%s\nwant a line with %q", out.String(), want)
		}
	}
}
