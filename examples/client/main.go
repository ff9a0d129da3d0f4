// Command client sends requests to an API behind `rl-exporter serve` through
// the rlclient transport and prints, for each, the status and the
// rate-limit headers the client acted on. Waits and retries are logged to
// stderr as they happen.
//
//	go run ./examples/client -url http://127.0.0.1:8480/ -n 12 -slow-down-below 2
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/rl-exporter/rl-exporter/rlclient"
)

func main() {
	url := flag.String("url", "http://127.0.0.1:8480/", "URL to request (an endpoint served through rl-exporter serve)")
	n := flag.Int("n", 10, "number of requests to send")
	retries := flag.Int("retries", rlclient.DefaultMaxRetries, "retries after a 429 or 503 (negative: none)")
	maxWait := flag.Duration("max-wait", 70*time.Second, "longest wait before one retry")
	slowDown := flag.Int64("slow-down-below", 0, "pace requests when fewer than this many remain (0: off)")
	header := flag.String("header", "", `extra request header "Name: value", e.g. "X-User-ID: alice"`)
	flag.Parse()
	if *n < 1 {
		fmt.Fprintln(os.Stderr, "client: -n must be at least 1")
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	client := &http.Client{Transport: rlclient.New(rlclient.Config{
		MaxRetries:    *retries,
		MaxWait:       *maxWait,
		SlowDownBelow: *slowDown,
		Logger:        log,
	})}

	start := time.Now()
	for i := 1; i <= *n; i++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, *url, nil)
		if err != nil {
			fmt.Fprintf(os.Stderr, "client: -url: %v\n", err)
			os.Exit(2)
		}
		if *header != "" {
			name, value, ok := strings.Cut(*header, ":")
			if !ok || strings.TrimSpace(name) == "" {
				fmt.Fprintf(os.Stderr, "client: -header %q: want \"Name: value\"\n", *header)
				os.Exit(2)
			}
			req.Header.Set(strings.TrimSpace(name), strings.TrimSpace(value))
		}
		resp, err := client.Do(req)
		if err != nil {
			fmt.Fprintf(os.Stderr, "client: request %d: %v\n", i, err)
			os.Exit(1)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		fmt.Printf("%3d  +%-6s %d", i, time.Since(start).Round(100*time.Millisecond), resp.StatusCode)
		for _, h := range []string{"RateLimit", "RateLimit-Policy", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "Retry-After"} {
			if v := resp.Header.Get(h); v != "" {
				fmt.Printf("  %s: %s", h, v)
			}
		}
		fmt.Println()
	}
}
