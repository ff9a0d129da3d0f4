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
	remove, err := Build(pkgDir, binary)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	remove()
	os.Exit(code)
}

// Build builds the command in pkgDir statically into a temporary directory
// and stores its path in *binary, for a TestMain that runs the tests itself
// (for instance under a leak check). remove deletes the directory; call it
// once the tests have ended.
func Build(pkgDir string, binary *string) (remove func(), err error) {
	dir, err := os.MkdirTemp("", "rl-exporter-e2e-")
	if err != nil {
		return nil, err
	}
	*binary = filepath.Join(dir, "rl-exporter")
	build := exec.Command("go", "build", "-o", *binary, pkgDir)
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("build %s: %v\n%s", pkgDir, err, out)
	}
	return func() { os.RemoveAll(dir) }, nil
}
