package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/rl-exporter/rl-exporter/httplimit"
)

// apiKeyEnv holds the API key of `usage` and `key` when --api-key is not given: a secret kept
// off the command line, where ps and shell history would show it.
const apiKeyEnv = "RL_API_KEY"

type stdinKey struct{}

// withStdin returns ctx carrying r as the process's standard input, which main sets and tests
// replace; a command reads it only when asked to (--api-key -).
func withStdin(ctx context.Context, r io.Reader) context.Context {
	return context.WithValue(ctx, stdinKey{}, r)
}

// stdinFrom is the standard input withStdin put in ctx; an empty one when none was.
func stdinFrom(ctx context.Context) io.Reader {
	if r, ok := ctx.Value(stdinKey{}).(io.Reader); ok {
		return r
	}
	return strings.NewReader("")
}

// apiKeyFlagHelp is the help of --api-key, shared by the commands that take one.
const apiKeyFlagHelp = "the API key a client sends (without its Authorization scheme); - reads it from stdin; default $" + apiKeyEnv

// apiKeyFrom is the raw API key given by --api-key (flag, "-" for stdin's first line) or, when
// the flag is absent, by apiKeyEnv; "" when neither gives one.
func apiKeyFrom(ctx context.Context, flag string, set bool, env environ) (string, error) {
	if !set {
		return strings.TrimSpace(env.Get(apiKeyEnv)), nil
	}
	if flag != "-" {
		return flag, nil
	}
	line, err := bufio.NewReader(io.LimitReader(stdinFrom(ctx), httplimit.MaxCheckKey+2)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("--api-key -: reading stdin: %w", err)
	}
	key := strings.TrimRight(line, "\r\n")
	if key == "" {
		return "", errors.New("--api-key -: stdin holds no key")
	}
	return key, nil
}

func runKey(ctx context.Context, args []string, env environ, stdout, stderr io.Writer) int {
	fs := newFlagSet("key", "--api-key KEY", "Prints the stored form of an API key: the client key serve counts it under and\n"+
		"GET "+httplimit.UsagePath+"?key= takes, \"apikey:\" and the first 16 hex digits of its SHA-256.", stderr)
	raw := fs.String("api-key", "", apiKeyFlagHelp)
	if status, ok := parseFlags(fs, args); !ok {
		return status
	}
	key, err := apiKeyFrom(ctx, *raw, flagSet(fs, "api-key"), env)
	if err != nil {
		fmt.Fprintf(stderr, "rl-exporter key: %v\n", err)
		return exitUsage
	}
	if key == "" {
		fmt.Fprintf(stderr, "rl-exporter key: --api-key or %s: required\n", apiKeyEnv)
		return exitUsage
	}
	fmt.Fprintln(stdout, httplimit.APIKeyKey(key))
	return exitOK
}

// flagSet reports whether the flag name was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
