package server_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/rl-exporter/rl-exporter/app"
	"github.com/rl-exporter/rl-exporter/config"
	"github.com/rl-exporter/rl-exporter/internal/eventually"
	"github.com/rl-exporter/rl-exporter/server"
)

// TestBuildStartsNothingAndServeRunsEveryPartUntilItEnds checks the one
// lifecycle: Build binds the listeners but runs no goroutine, Serve runs
// every part (HTTP, gRPC with its directory watch, the live-limit refresh,
// the config file watch, SIGHUP's reloads) and says when they all serve,
// and at its end nothing it started is left running.
func TestBuildStartsNothingAndServeRunsEveryPartUntilItEnds(t *testing.T) {
	dir := t.TempDir()
	rlsDir := filepath.Join(dir, "rls")
	if err := os.Mkdir(rlsDir, 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(rlsDir, "shop.yaml"), fmt.Sprintf(grpcDomain, 5))
	file := filepath.Join(dir, "rl.yaml")
	writeFile(t, file, fmt.Sprintf(`
server: {listen: "127.0.0.1:0", grpc_listen: "127.0.0.1:0"}
rls: {config_dir: %q}
reload: {watch: true, interval: 100ms}
`, rlsDir))
	sources := &config.Sources{File: file}
	cfg, err := sources.Load()
	if err != nil {
		t.Fatal(err)
	}
	ours := newFamily(currentGoroutine())
	if gs := ours.alive(); len(gs) > 0 {
		t.Fatalf("goroutines of this test running before Build:%s", stacks(gs))
	}
	srv, err := app.Build(cfg, app.Deps{Sources: sources, Reloads: make(chan struct{})})
	if err != nil {
		t.Fatal(err)
	}
	if gs := ours.alive(); len(gs) > 0 {
		t.Errorf("Build left %d goroutines running, want none: it starts nothing%s", len(gs), stacks(gs))
	}
	select {
	case <-srv.Ready():
		t.Fatal("ready before Serve")
	default:
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	select {
	case <-srv.Ready():
	case err := <-done:
		t.Fatalf("Serve ended before it was ready: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("not ready within 10s")
	}
	if len(ours.alive()) == 0 {
		t.Fatal("Serve is ready but runs no goroutine")
	}
	resp, err := http.Get("http://" + srv.Addr("main") + server.HealthPath)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /healthz once ready: %v %v", resp, err)
	}
	resp.Body.Close()
	conn, err := grpc.NewClient(srv.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hctx, hcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer hcancel()
	if h, err := healthpb.NewHealthClient(conn).Check(hctx, &healthpb.HealthCheckRequest{}); err != nil || h.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("gRPC health once ready: %v %v", h, err)
	}
	conn.Close()

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if err := srv.Shutdown(); err != nil {
		t.Errorf("Shutdown after Serve: %v", err)
	}
	if !eventually.Within(5*time.Second, func() bool { return len(ours.alive()) == 0 }) {
		t.Errorf("goroutines Serve started still run 5s after it ended:%s", stacks(ours.alive()))
	}
}

// TestShutdownOfABuiltNeverServedReleasesItsListeners checks that a Built
// that was never served gives its ports back.
func TestShutdownOfABuiltNeverServedReleasesItsListeners(t *testing.T) {
	rlsDir := t.TempDir()
	writeFile(t, filepath.Join(rlsDir, "shop.yaml"), fmt.Sprintf(grpcDomain, 5))
	cfg, err := config.Parse("rl.yaml", []byte(fmt.Sprintf("server: {listen: \"127.0.0.1:0\", grpc_listen: \"127.0.0.1:0\"}\nrls: {config_dir: %q}\n", rlsDir)))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := app.Build(cfg, app.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	main, grpcAddr := srv.Addr("main"), srv.GRPCAddr()
	if err := srv.Shutdown(); err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{main, grpcAddr} {
		cfg, err := config.Parse("rl.yaml", []byte(fmt.Sprintf("server: {listen: %q}\n", addr)))
		if err != nil {
			t.Fatal(err)
		}
		again, err := app.Build(cfg, app.Deps{})
		if err != nil {
			t.Fatalf("%s not released by Shutdown: %v", addr, err)
		}
		_ = again.Shutdown()
	}
}
