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
	"sort"
	"syscall"
)

// command is one subcommand. run gets the arguments after the subcommand's
// name and returns the process exit status.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int
}

// commands is filled by each subcommand's file in its init function.
var commands = map[string]command{}

func register(name, summary string, run func(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int) {
	commands[name] = command{summary: summary, run: run}
}

// Exit statuses shared by all subcommands.
const (
	exitOK      = 0
	exitFailure = 1 // invalid input or a failed run
	exitUsage   = 2 // bad flags or arguments
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run dispatches to a subcommand; tests call it in-process.
func run(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
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
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "rl-exporter: unknown command %q\n", args[0])
		usage(stderr)
		return exitUsage
	}
	return c.run(ctx, args[1:], env, stdout, stderr)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: rl-exporter <command> [flags]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "  version    print the version\n\nRun 'rl-exporter <command> -h' for a command's flags.")
}
