package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/eventually"
)

// freeListenAddr returns a loopback address nothing listens on.
func freeListenAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startCommand runs a subcommand until the test ends, and waits until addr
// accepts connections.
func startCommand(t *testing.T, addr string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var out bytes.Buffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, args, nil, io.Discard, &out) }()
	t.Cleanup(func() { cancel(); <-done })
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		select {
		case code := <-done:
			done <- code
			t.Fatalf("%v exited %d before listening on %s:\n%s", args, code, addr, out.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v never listened on %s", args, addr)
		}
	}
}

// costTotals reads rate_limit_cost_total by phase from /metrics.
func costTotals(t *testing.T, base string) map[string]int64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	out := map[string]int64{}
	for _, m := range regexp.MustCompile(`(?m)^rate_limit_cost_total\{[^}]*phase="([a-z]+)"[^}]*\} (\S+)$`).FindAllStringSubmatch(string(body), -1) {
		v, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			t.Fatal(err)
		}
		out[m[1]] += int64(v)
	}
	return out
}

// serve in front of demo-upstream --llm charges each answer exactly the
// usage demo-upstream reports in it: the JSON answer's usage, and the
// usage chunk of a stream.
func TestServeChargesExactlyTheUsageTheLLMDemoReports(t *testing.T) {
	upstream, proxy := freeListenAddr(t), freeListenAddr(t)
	startCommand(t, upstream, "demo-upstream", "--llm", "--listen", upstream, "--completion-tokens", "300")
	cfg := filepath.Join(t.TempDir(), "llm.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`server:
  listen: %q
  upstream: "http://%s"
store: {type: memory}
classes:
  chat:
    routes: ["POST /v1/chat/completions"]
    cost_from: {json: usage.total_tokens}
    estimate: {json: max_tokens, default: 1000, max: 4000}
    limits:
      default: {algorithm: fixed_window, rate: 1000000, period: 1m}
  default:
    limits:
      default: {algorithm: fixed_window, rate: 60, period: 1m}
`, proxy, upstream)), 0o600); err != nil {
		t.Fatal(err)
	}
	startCommand(t, proxy, "serve", "--config", cfg)
	base := "http://" + proxy

	// max_tokens bounds the completion alone: an answer reserved at its
	// max_tokens costs more than it reserved when the completion reaches
	// it (the second request), and is charged the excess, refunded nothing.
	reported, reserved, refunded := int64(0), int64(0), int64(0)
	for _, tt := range []struct {
		body      string
		maxTokens int64
	}{
		{`{"model": "m", "max_tokens": 800, "messages": [{"role": "user", "content": "Say hello in Japanese."}]}`, 800},
		{`{"model": "m", "max_tokens": 120, "messages": [{"role": "user", "content": "hi"}]}`, 120},
		{`{"model": "m", "max_tokens": 2000, "stream": true, "stream_options": {"include_usage": true}, "messages": [{"role": "system", "content": "Answer at length."}, {"role": "user", "content": "Why limit rates?"}]}`, 2000},
	} {
		resp, err := http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(tt.body))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s: status %d: %s", tt.body, resp.StatusCode, body)
		}
		// The usage the client sees: the JSON answer's, or the stream's
		// last event that has one.
		var usage struct {
			Usage *struct {
				Total int64 `json:"total_tokens"`
			} `json:"usage"`
		}
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			for _, line := range strings.Split(string(body), "\n") {
				ev := usage
				if d, ok := strings.CutPrefix(line, "data: "); ok && json.Unmarshal([]byte(d), &ev) == nil && ev.Usage != nil {
					usage = ev
				}
			}
		} else if err := json.Unmarshal(body, &usage); err != nil {
			t.Fatal(err)
		}
		if usage.Usage == nil || usage.Usage.Total <= 0 {
			t.Fatalf("%s: no usage in the answer:\n%s", tt.body, body)
		}
		reported += usage.Usage.Total
		reserved += tt.maxTokens
		refunded += max(0, tt.maxTokens-usage.Usage.Total)
	}
	want := map[string]int64{"reserved": reserved, "committed": reported, "refunded": refunded}
	var got map[string]int64
	if !eventually.Within(10*time.Second, func() bool {
		got = costTotals(t, base)
		return got["reserved"] == want["reserved"] && got["committed"] == want["committed"] && got["refunded"] == want["refunded"] && got["expired"] == 0
	}) {
		t.Fatalf("rate_limit_cost_total by phase %v, want %v (the answers reported %d tokens)", got, want, reported)
	}
}
