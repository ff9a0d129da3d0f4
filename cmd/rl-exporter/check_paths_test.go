package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckPrintsHowPathsAreReadAndNamesAnUnknownChoice(t *testing.T) {
	for _, c := range []struct {
		yaml, want string
		code       int
	}{
		{"", "paths: escaped_slashes reject (a path with %2F or %5C is refused: 400 on the proxy, the deny status on /v1/auth), case sensitive (matching only), trailing_slash ignore", 0},
		{"server: {paths: {escaped_slashes: decode, case: insensitive, trailing_slash: strict}}\n", "paths: escaped_slashes decode (%2F and %5C are decoded to / before matching and forwarding), case insensitive (matching only), trailing_slash strict", 0},
		{"server: {paths: {escaped_slashes: unescape}}\n", `server.paths.escaped_slashes: "unescape": want reject, decode or keep`, 1},
		{"server: {paths: {case: lower}}\n", `server.paths.case: "lower": want sensitive or insensitive`, 1},
	} {
		file := filepath.Join(t.TempDir(), "rl.yaml")
		if err := os.WriteFile(file, []byte(c.yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		var out, errb bytes.Buffer
		code := run(context.Background(), []string{"check", "--config", file}, nil, &out, &errb)
		if code != c.code || !strings.Contains(out.String()+errb.String(), c.want) {
			t.Errorf("%q: exit %d, printed %q %q; want exit %d and %q", c.yaml, code, out.String(), errb.String(), c.code, c.want)
		}
	}
}
