package server_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/rl-exporter/rl-exporter/internal/leakcheck"
	"github.com/rl-exporter/rl-exporter/internal/testbin"
)

// binary is rl-exporter, built once for this test binary.
var binary string

// TestMain builds the binary the end-to-end tests run, runs the tests and
// fails them if any goroutine they started (servers, listeners, live-limit
// caches, Redis clients and the store's batch senders) is still running
// once they have all ended.
func TestMain(m *testing.M) {
	remove, err := testbin.Build("../cmd/rl-exporter", &binary)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	leakcheck.Main(m, remove)
}
