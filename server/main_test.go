package server_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/app"
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

// serve runs srv until the test ends and returns once every part of it
// serves (Built.Ready); a Serve that ends early fails the test.
func serve(t testing.TB, srv *app.Built) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	select {
	case <-srv.Ready():
	case err := <-done:
		done <- err
		t.Fatalf("serve ended before it was ready: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("serve not ready within 10s")
	}
}
