package docs

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestMakeRunsMetricsHintShowsRateLimitSeries runs serve as make run does
// (examples/demo.yaml, on free ports) and applies the metrics hint make run
// prints: it must show rate-limit series, not only the Go runtime's.
func TestMakeRunsMetricsHintShowsRateLimitSeries(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	hint := regexp.MustCompile(`curl -s http://127\.0\.0\.1:8480/metrics \| grep '\^([a-z_]+)'`).FindStringSubmatch(string(raw))
	if hint == nil {
		t.Fatal("make run prints no metrics hint that greps a metric prefix")
	}
	prefix := hint[1]

	listen := freeAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "serve", "--config", "examples/demo.yaml", "--listen", listen, "--grpc-listen", freeAddr(t))
	cmd.Dir = root
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = cmd.Wait() }()
	for {
		c, err := net.DialTimeout("tcp", listen, time.Second)
		if err == nil {
			c.Close()
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("serve never listened on %s", listen)
		case <-time.After(50 * time.Millisecond):
		}
	}
	resp, err := http.Get(fmt.Sprintf("http://%s/metrics", listen))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	shown := 0
	for _, l := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(l, prefix) {
			shown++
		}
	}
	if shown == 0 || !strings.HasPrefix(prefix, "rate_limit_") {
		t.Errorf("the hint greps %q, which shows %d lines of /metrics", prefix, shown)
	}
}
