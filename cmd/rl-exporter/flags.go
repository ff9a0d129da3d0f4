package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
)

// newFlagSet returns the flag set of the subcommand name, writing its
// errors and usage to stderr. -h and a bad flag print the usage: the
// synopsis, the text about the command (if any) and the flags.
func newFlagSet(name, synopsis, about string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: rl-exporter %s %s\n\n", name, synopsis)
		if about != "" {
			fmt.Fprintf(stderr, "%s\n\n", about)
		}
		fmt.Fprintln(stderr, "flags:")
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args with fs and refuses positional arguments, which no
// subcommand takes. When ok is false the subcommand returns status at once:
// exitOK after -h, exitUsage after a bad flag or a stray argument.
func parseFlags(fs *flag.FlagSet, args []string) (status int, ok bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK, false
		}
		return exitUsage, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "rl-exporter %s: unexpected argument %q (run 'rl-exporter %s -h' for its flags)\n", fs.Name(), fs.Arg(0), fs.Name())
		return exitUsage, false
	}
	return exitOK, true
}
