package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/rl-exporter/rl-exporter/config"
	"github.com/rl-exporter/rl-exporter/rls"
)

// runCheck validates the file as serve would load it, the files it names
// (secrets, keys, admin tokens) included, but without the environment or
// flags of the machine it runs on: what is checked is the file.
func runCheck(_ context.Context, args []string, _ environ, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("config", "", "YAML config file to validate (required)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: rl-exporter check --config FILE\n\nflags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "rl-exporter check: takes no arguments, got %q\n", fs.Args())
		return exitUsage
	}
	if *file == "" {
		fmt.Fprintln(stderr, "rl-exporter check: --config FILE is required")
		fs.Usage()
		return exitUsage
	}
	cfg, err := config.Load(*file)
	if err != nil {
		printConfigProblems(stderr, "check", *file, err)
		return exitFailure
	}
	domains := ""
	if cfg.Server.GRPCListen != "" {
		rules, err := rls.LoadDir(cfg.RLSConfigDir())
		if err != nil {
			printConfigProblems(stderr, "check", *file, fmt.Errorf("rls.config_dir: %w", err))
			return exitFailure
		}
		domains = fmt.Sprintf(", rls domains %s", strings.Join(rules.Domains(), " "))
	}
	fmt.Fprintf(stdout, "%s: valid (%d classes, %d tiers, store %s%s)\n", *file, len(cfg.Classes), len(cfg.Tiers.Names), cfg.Store.Type, domains)
	return exitOK
}

// printConfigProblems writes a configuration error of the command cmd as a
// heading and one indented line per problem, the way check and serve both
// report a configuration that does not load.
func printConfigProblems(w io.Writer, cmd, source string, err error) {
	lines := strings.Split(err.Error(), "\n")
	fmt.Fprintf(w, "rl-exporter %s: %s is invalid (%d problem(s)):\n", cmd, source, len(lines))
	for _, l := range lines {
		fmt.Fprintf(w, "  %s\n", l)
	}
}
