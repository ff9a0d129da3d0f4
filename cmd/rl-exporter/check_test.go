package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckExitsZeroOneOrTwo(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("store: {timout: 1s}\nclasses: {default: {limits: {default: {algorithm: magic, rate: 0, period: 1m}}}}\n"), 0o600); err != nil {
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
