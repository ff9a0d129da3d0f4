package docs

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	return freeAddrs(t, 1)[0]
}

// freeAddrs returns n distinct loopback addresses that nothing listens on,
// for programs the test starts. Their ports are below the kernel's
// ephemeral range where it has room: a port from that range (as
// 127.0.0.1:0 gives) can be taken, between its choice and the program's
// listen, as the local port of any connection the machine opens (tests of
// other packages open thousands), and the program then fails to listen.
// Each port is held until all are chosen, so that no two are the same.
func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	low, high := belowEphemeral()
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for tries := 0; len(held) < n; tries++ {
		addr := "127.0.0.1:0"
		if high > low && tries < 1000 {
			addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(low+rand.IntN(high-low)))
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			if addr != "127.0.0.1:0" {
				continue // another program's port: try another
			}
			t.Fatal(err)
		}
		held = append(held, l)
	}
	addrs := make([]string, n)
	for i, l := range held {
		addrs[i] = l.Addr().String()
	}
	return addrs
}

// belowEphemeral is the range [low, high) of ports freeAddrs draws from:
// from 20000, above the ports of common services and of the examples, to
// the start of the ephemeral range (/proc/sys/net/ipv4/ip_local_port_range);
// empty where the kernel does not say or leaves too few below it.
func belowEphemeral() (low, high int) {
	const from = 20000
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, 0
	}
	start, err := strconv.Atoi(f[0])
	if err != nil || start < from+1000 {
		return 0, 0
	}
	return from, start
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

	addrs := freeAddrs(t, 2)
	listen := addrs[0]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "serve", "--config", "examples/demo.yaml", "--listen", listen, "--grpc-listen", addrs[1])
	cmd.Dir = root
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	defer func() { cancel(); <-exited }()
	for {
		c, err := net.DialTimeout("tcp", listen, time.Second)
		if err == nil {
			c.Close()
			break
		}
		select {
		case <-exited:
			t.Fatalf("serve ended (%v) before it listened on %s:\n%s", waitErr, listen, out.String())
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
