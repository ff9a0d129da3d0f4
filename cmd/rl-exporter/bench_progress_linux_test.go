package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// openTerminal opens a pseudo-terminal: what the program writes to tty
// is read from what the test reads, all of it once tty is closed.
func openTerminal(t *testing.T) (tty *os.File, written func() string) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.Copy(&got, m) // ends with EIO once tty is closed
	}()
	return tty, func() string {
		tty.Close()
		<-done
		return got.String()
	}
}

// On a terminal, bench shows how far it is, the decisions so far and
// their rate, in every mode; with --json it prints nothing there but the
// line saying what runs, and its report on stdout.
func TestBenchShowsProgressOnATerminalAndNoneWithJSON(t *testing.T) {
	for _, c := range []struct {
		name     string
		args     []string
		progress []string
	}{
		{"decide", nil, []string{"decisions, ", "/s"}},
		{"reserve", []string{"--mode", "reserve", "--algorithm", "token_bucket"}, []string{"turn 1/12, plain: ", "turn 2/12, pairs: ", "decisions, "}},
		{"decide --json", []string{"--json"}, nil},
		{"reserve --json", []string{"--json", "--mode", "reserve", "--algorithm", "token_bucket"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			tty, written := openTerminal(t)
			var stdout bytes.Buffer
			args := append([]string{"bench", "--store", "memory", "--duration", "1200ms", "--concurrency", "2", "--keys", "100"}, c.args...)
			if code := run(context.Background(), args, nil, &stdout, tty); code != exitOK {
				t.Fatalf("exit %d: %s", code, written())
			}
			shown := written()
			for _, w := range c.progress {
				if !strings.Contains(shown, w) {
					t.Errorf("the terminal shows no %q:\n%q", w, shown)
				}
			}
			if c.progress == nil && (strings.Contains(shown, "decisions, ") || strings.Contains(shown, "|")) {
				t.Errorf("with --json the terminal shows progress:\n%q", shown)
			}
			if c.progress == nil && !strings.HasPrefix(strings.TrimSpace(stdout.String()), "{") {
				t.Errorf("with --json stdout is not the report alone:\n%s", stdout.String())
			}
		})
	}
}
