package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"
)

// The subcommands that parse their flags with newFlagSet and parseFlags
// answer -h, a bad flag and a stray argument alike, before doing anything
// (a stray argument to a server must not start it).
func TestSubcommandsAnswerHelpBadFlagsAndStrayArgumentsAlike(t *testing.T) {
	for _, name := range []string{"rules", "simulate", "traffic", "alert-sink", "demo-upstream"} {
		tests := []struct {
			name   string
			args   []string
			status int
			stderr string
		}{
			{"-h prints the usage and exits 0", []string{"-h"}, exitOK, "usage: rl-exporter " + name + " "},
			{"an unknown flag prints the usage and exits 2", []string{"--no-such-flag"}, exitUsage, "usage: rl-exporter " + name + " "},
			{"a stray argument is named and exits 2", []string{"stray"}, exitUsage, "rl-exporter " + name + `: unexpected argument "stray"`},
		}
		for _, tt := range tests {
			t.Run(name+": "+tt.name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				var stdout, stderr bytes.Buffer
				status := run(ctx, append([]string{name}, tt.args...), nil, &stdout, &stderr)
				if status != tt.status {
					t.Errorf("exit %d, want %d; stderr:\n%s", status, tt.status, stderr.String())
				}
				if !strings.Contains(stderr.String(), tt.stderr) {
					t.Errorf("stderr lacks %q:\n%s", tt.stderr, stderr.String())
				}
				if stdout.Len() != 0 {
					t.Errorf("stdout not empty: %q", stdout.String())
				}
			})
		}
	}
}

func TestDemoUpstreamRefusesABadCapacity(t *testing.T) {
	for _, args := range [][]string{{"--capacity", "-1"}, {"--capacity", "10", "--service-time", "0s"}} {
		var stderr strings.Builder
		if code := runDemoUpstream(t.Context(), args, nil, io.Discard, &stderr); code != exitUsage || !strings.Contains(stderr.String(), "--capacity") {
			t.Errorf("demo-upstream %v: exit %d, %q; want usage error naming the flags", args, code, stderr.String())
		}
	}
}
