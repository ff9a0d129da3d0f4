package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/capacity"
	"github.com/rl-exporter/rl-exporter/internal/llmdemo"
)

// demoUpstreamHandler answers every request with what it received, as JSON.
func demoUpstreamHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{
			"upstream":        "rl-exporter demo-upstream",
			"method":          r.Method,
			"path":            r.URL.Path,
			"x_forwarded_for": r.Header.Get("X-Forwarded-For"),
			"x_user_id":       r.Header.Get("X-User-ID"),
		})
	})
}

func runDemoUpstream(ctx context.Context, args []string, _ environ, stdout, stderr io.Writer) int {
	fs := newFlagSet("demo-upstream", "[--listen ADDR] [--capacity C --service-time T] [--llm [--completion-tokens N] [--token-delay D]]",
		"Answers every request with what it received, as JSON: an API to put serve in front of.\n"+
			"With --capacity, C workers each hold a request for --service-time and the rest queue,\n"+
			"so that latency grows once more than C requests are in flight (at most C/T requests per second).\n"+
			"With --llm, answers POST /v1/chat/completions as an OpenAI-compatible API: JSON with usage,\n"+
			"or server-sent chunks with \"stream\": true (and a usage chunk with stream_options.include_usage).\n"+
			"prompt_tokens: 3 per message plus its text's bytes / 4, plus 3; completion_tokens: --completion-tokens,\n"+
			"or max_tokens when smaller; each generated token takes --token-delay.", stderr)
	listen := fs.String("listen", "127.0.0.1:8481", "address to listen on")
	workers := fs.Int("capacity", 0, "requests served at once; 0: no bound and no service time")
	serviceTime := fs.Duration("service-time", 50*time.Millisecond, "how long a worker holds each request (with --capacity)")
	llm := fs.Bool("llm", false, "answer POST /v1/chat/completions as an OpenAI-compatible LLM API")
	completion := fs.Int("completion-tokens", 300, "tokens of an answer that max_tokens does not cut short (with --llm)")
	tokenDelay := fs.Duration("token-delay", 0, "time each generated token takes: between streamed chunks, and before a JSON answer (with --llm)")
	if status, ok := parseFlags(fs, args); !ok {
		return status
	}
	if *workers < 0 || *serviceTime <= 0 {
		fmt.Fprintf(stderr, "rl-exporter demo-upstream: --capacity must not be negative and --service-time must be positive\n")
		return exitUsage
	}
	if *completion < 1 || *tokenDelay < 0 {
		fmt.Fprintf(stderr, "rl-exporter demo-upstream: --completion-tokens must be at least 1 and --token-delay not negative\n")
		return exitUsage
	}
	handler := demoUpstreamHandler()
	if *llm {
		handler = llmdemo.Handler(llmdemo.Options{CompletionTokens: *completion, TokenDelay: *tokenDelay})
	}
	if *workers > 0 {
		handler = capacity.New(*workers, *serviceTime, handler)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintf(stderr, "rl-exporter demo-upstream: %v\n", err)
		return exitFailure
	}
	fmt.Fprintf(stdout, "demo upstream listening on http://%s\n", ln.Addr())
	if *llm {
		fmt.Fprintf(stdout, "OpenAI-compatible: POST http://%s/v1/chat/completions, %d completion tokens, %s each\n", ln.Addr(), *completion, *tokenDelay)
	}
	if *workers > 0 {
		fmt.Fprintf(stdout, "capacity %d in flight, %s each: %.0f requests per second\n", *workers, *serviceTime, float64(*workers)/serviceTime.Seconds())
	}
	if err := serveHTTP(ctx, ln, handler); err != nil {
		fmt.Fprintf(stderr, "rl-exporter demo-upstream: %v\n", err)
		return exitFailure
	}
	return exitOK
}
