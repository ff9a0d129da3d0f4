package deploytest

import (
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// repo is the repository's root, where the main module is.
const repo = "../.."

// binary is rl-exporter, built once for the run by TestMain.
var binary string

func TestMain(m *testing.M) {
	// Helm's loader logs each symbolic link it follows: the chart's
	// files/prometheusrule.yaml is one, to the generated PrometheusRule.
	log.SetOutput(io.Discard)
	dir, err := os.MkdirTemp("", "rl-exporter-deploytest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "rl-exporter")
	build := exec.Command("go", "build", "-o", binary, "./cmd/rl-exporter")
	build.Dir = repo
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build ./cmd/rl-exporter: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// run runs rl-exporter with args and fails the test unless it exits 0.
func run(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(binary, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("rl-exporter %v: %v\n%s", args, err, out)
	}
	return string(out)
}
