// Command rl-exporter is a rate limiter for HTTP APIs that is also its own
// Prometheus exporter and SLO kit. Each subcommand is a thin function over
// the packages of this module; this is the only place that reads flags and
// the environment.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// runFunc runs one subcommand: args are the arguments after the
// subcommand's name, env the process environment, and the result is the
// process exit status.
type runFunc func(ctx context.Context, args []string, env environ, stdout, stderr io.Writer) int

// command is one subcommand.
type command struct {
	name    string
	summary string
	run     runFunc
}

// commands is every subcommand, in the order the help lists them. A new
// subcommand is one line here and one file beside this one.
var commands = []command{
	{"alert-sink", "receive Alertmanager webhook notifications and log them (a stand-in for on-call)", runAlertSink},
	{"bench", "measure decisions per second and latency of a limit on a store", runBench},
	{"check", "validate a config file without starting anything (exit 0 valid, 1 invalid, 2 usage)", runCheck},
	{"demo-upstream", "run a tiny HTTP API to put serve in front of (for the demo and tests)", runDemoUpstream},
	{"key", "print the stored form of an API key, as serve counts it and GET /v1/usage?key= takes it", runKey},
	{"rules", "generate Prometheus rules, their promtool tests, the Alertmanager config and Grafana dashboards from an SLO spec", runRules},
	{"serve", "run the rate limiter: reverse proxy, POST /v1/check, /metrics, /healthz, /readyz", runServe},
	{"simulate", "replay a traffic pattern against the six algorithms, in simulated time", runSimulate},
	{"traffic", "send a mix of normal and abusive HTTP clients through serve (demo load)", runTraffic},
	{"usage", "print what a client key has used of each of its limits, from a running serve", runUsage},
}

// Exit statuses shared by all subcommands.
const (
	exitOK      = 0
	exitFailure = 1 // invalid input or a failed run
	exitUsage   = 2 // bad flags or arguments
)

// environ is the process environment as os.Environ returns it, "NAME=value"
// entries, later ones winning. main passes the real one; tests pass their
// own (nil is an empty environment), so no subcommand reads os.Getenv.
type environ []string

// Get returns the value of name, or "" when it is not set.
func (e environ) Get(name string) string {
	for i := len(e) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(e[i], "="); ok && k == name {
			return v
		}
	}
	return ""
}

// WithPrefix returns the "NAME=value" entries whose name starts with
// prefix and whose value is not empty, one per name (the last one set),
// in the order they first appear.
func (e environ) WithPrefix(prefix string) []string {
	var out []string
	seen := map[string]bool{}
	for _, kv := range e {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, prefix) || seen[name] {
			continue
		}
		seen[name] = true
		if v := e.Get(name); v != "" {
			out = append(out, name+"="+v)
		}
	}
	return out
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(withStdin(ctx, os.Stdin), os.Args[1:], os.Environ(), os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run dispatches to a subcommand; tests call it in-process.
func run(ctx context.Context, args []string, env environ, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	if args[0] == "version" || args[0] == "--version" {
		fmt.Fprintf(stdout, "rl-exporter %s (revision %s)\n", version, revision)
		return exitOK
	}
	for _, c := range commands {
		if c.name == args[0] {
			return c.run(ctx, args[1:], env, stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "rl-exporter: unknown command %q\n", args[0])
	usage(stderr)
	return exitUsage
}

// usage writes the top-level help: every command of the table with its
// summary, then version.
func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: rl-exporter <command> [flags]\n\ncommands:")
	width := len("version")
	for _, c := range commands {
		width = max(width, len(c.name))
	}
	for _, c := range commands {
		fmt.Fprintf(w, "  %-*s  %s\n", width, c.name, c.summary)
	}
	fmt.Fprintf(w, "  %-*s  %s\n", width, "version", "print the version")
	fmt.Fprintln(w, "\nRun 'rl-exporter <command> -h' for a command's flags.")
}
