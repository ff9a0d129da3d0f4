package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestTopLevelHelpAlignsEverySummary(t *testing.T) {
	var out, errb bytes.Buffer
	if got := run(context.Background(), []string{"help"}, nil, &out, &errb); got != exitOK {
		t.Fatalf("exit %d", got)
	}
	_, list, ok := strings.Cut(errb.String(), "commands:\n")
	if !ok {
		t.Fatalf("no command list:\n%s", errb.String())
	}
	list, _, _ = strings.Cut(list, "\n\n")
	column := -1
	lines := strings.Split(list, "\n")
	if len(lines) != len(commands)+1 {
		t.Fatalf("%d lines, want one per command and version:\n%s", len(lines), list)
	}
	for _, l := range lines {
		name := strings.Fields(l)[0]
		at := strings.Index(l[len("  ")+len(name):], strings.Fields(l)[1]) + len("  ") + len(name)
		if column == -1 {
			column = at
		}
		if at != column {
			t.Errorf("the summary of %s starts at column %d, the first at %d:\n%s", name, at, column, list)
		}
	}
}

func TestServeHelpDescribesServeBeforeItsFlags(t *testing.T) {
	var out, errb bytes.Buffer
	if got := run(context.Background(), []string{"serve", "-h"}, nil, &out, &errb); got != exitOK {
		t.Fatalf("exit %d", got)
	}
	help := errb.String()
	about, flags, ok := strings.Cut(help, "\nflags:\n")
	if !ok || !strings.Contains(flags, "-config") {
		t.Fatalf("no flags section:\n%s", help)
	}
	for _, want := range []string{"Runs the rate limiter", "429", "POST /v1/check", "/metrics", "RL_"} {
		if !strings.Contains(about, want) {
			t.Errorf("the description before the flags lacks %q:\n%s", want, about)
		}
	}
}
