package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
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
	fs := newFlagSet("demo-upstream", "[--listen ADDR]", "Answers every request with what it received, as JSON: an API to put serve in front of.", stderr)
	listen := fs.String("listen", "127.0.0.1:8481", "address to listen on")
	if status, ok := parseFlags(fs, args); !ok {
		return status
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintf(stderr, "rl-exporter demo-upstream: %v\n", err)
		return exitFailure
	}
	fmt.Fprintf(stdout, "demo upstream listening on http://%s\n", ln.Addr())
	if err := serveHTTP(ctx, ln, demoUpstreamHandler()); err != nil {
		fmt.Fprintf(stderr, "rl-exporter demo-upstream: %v\n", err)
		return exitFailure
	}
	return exitOK
}
