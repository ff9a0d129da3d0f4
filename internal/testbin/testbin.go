// Package testbin builds the rl-exporter binary once per test binary, for
// tests that run it as a separate process the way users do.
package testbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Main builds the command in pkgDir (relative to the test's package, e.g.
// "../cmd/rl-exporter") statically into a temporary directory, stores its
// path in *binary, runs the tests and exits with their status, removing the
// directory. Call it from TestMain; it never returns.
func Main(m *testing.M, pkgDir string, binary *string) {
	dir, err := os.MkdirTemp("", "rl-exporter-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	*binary = filepath.Join(dir, "rl-exporter")
	build := exec.Command("go", "build", "-o", *binary, pkgDir)
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build %s: %v\n%s", pkgDir, err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
