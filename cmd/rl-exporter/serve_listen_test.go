package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A first serve, without a config or with one that sets no listener,
// answers this host alone and says so; --listen :8480 answers every
// interface.
func TestServeWithoutAListenerBindsThisHostOnlyAndSaysHowToOpenIt(t *testing.T) {
	noListen := filepath.Join(t.TempDir(), "rl.yaml")
	if err := os.WriteFile(noListen, []byte("store: {type: memory}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		want string
		note bool
	}{
		{"no config", nil, "127.0.0.1:8480", true},
		{"a config without server.listen", []string{"--config", noListen}, "127.0.0.1:8480", true},
		{"--listen :8480", []string{"--listen", ":8480"}, ":8480", false},
		{"--listen :8480 over a config", []string{"--config", noListen, "--listen", ":8480"}, ":8480", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, set, err := parseServeFlags(c.args, &strings.Builder{})
			if err != nil {
				t.Fatal(err)
			}
			src := serveSources(f, set, nil)
			cfg, err := src.Load()
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Server.Listen != c.want {
				t.Errorf("server.listen %q, want %q", cfg.Server.Listen, c.want)
			}
			note := defaultListenNote(cfg)
			if c.note != (note != "") {
				t.Fatalf("note %q, want one: %v", note, c.note)
			}
			if c.note && (!strings.Contains(note, "127.0.0.1:8480, this host only") || !strings.Contains(note, "--listen :8480")) {
				t.Errorf("note %q: want it to name the address, this host only, and --listen :8480", note)
			}
		})
	}
}
