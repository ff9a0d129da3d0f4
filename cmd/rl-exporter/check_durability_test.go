package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// check refuses a durability_timeout the Redis client's read timeout would cut short, naming the
// key, both values and the fix, and exits non-zero.
func TestCheckRefusesADurabilityTimeoutAtOrOverTheRedisReadTimeout(t *testing.T) {
	file := filepath.Join(t.TempDir(), "wait.yaml")
	if err := os.WriteFile(file, []byte(`store:
  type: redis
  timeout: 2s
  redis: {url: "redis://127.0.0.1:1", durability: wait, durability_timeout: 600ms}
classes: {default: {limits: {default: {algorithm: gcra, rate: 10, period: 1s}}}}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if got := run(context.Background(), []string{"check", "--config", file}, nil, &out, &errb); got != exitFailure {
		t.Fatalf("exit %d, want %d; stdout %q stderr %q", got, exitFailure, out.String(), errb.String())
	}
	for _, w := range []string{"store.redis.durability_timeout: 600ms", "(500ms)", "lower it below 500ms", "?read_timeout="} {
		if !strings.Contains(errb.String(), w) {
			t.Errorf("stderr %q does not say %q", errb.String(), w)
		}
	}
	if strings.Contains(out.String(), "valid") {
		t.Errorf("stdout %q calls the file valid", out.String())
	}
}
