package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// check names what a config that loads leaves open: the decision API
// behind a trusted proxy or open to other hosts without a token (a
// warning), an admin listener beyond this host without admin tokens
// (refused).
func TestCheckNamesWhatTheConfigExposes(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "check-tokens")
	if err := os.WriteFile(tokens, []byte("orders orders-svc-0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, yaml string
		want       int
		inErr      string // "" : stderr empty
	}{
		{"the defaults", "", exitOK, ""},
		{"a trusted proxy on this host", "identity: {trusted_proxies: [127.0.0.1/32]}\n", exitOK,
			"warning: config FILE: server.check_api.allowed_peers: the decision API, which believes the key and plan_tier of any caller, answers without a token: 127.0.0.0/8 holds identity.trusted_proxies 127.0.0.1/32"},
		{"other hosts allowed", "server: {check_api: {allowed_peers: [10.0.0.0/8]}}\n", exitOK,
			"server.check_api.allowed_peers: the decision API, which believes the key and plan_tier of any caller, answers without a token: 10.0.0.0/8 is not this host"},
		{"a trusted proxy and a token file", "identity: {trusted_proxies: [127.0.0.1/32]}\nserver: {check_api: {tokens_file: " + tokens + "}}\n", exitOK, ""},
		{"the admin listener on every interface", "server: {admin_listen: \":8482\"}\n", exitFailure,
			"config FILE: server.admin_listen: \":8482\" listens beyond this host and admin.tokens_file and admin.tokens are empty"},
		{"the admin listener on 0.0.0.0", "server: {admin_listen: \"0.0.0.0:8482\"}\n", exitFailure, "server.admin_listen: \"0.0.0.0:8482\""},
		{"the admin listener on loopback", "server: {admin_listen: \"127.0.0.1:8482\"}\n", exitOK, ""},
		{"the admin listener on every interface with tokens", "server: {admin_listen: \":8482\"}\nadmin: {tokens: \"ops:read-write:ops-0123456789abcdef\"}\n", exitOK, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "rl.yaml")
			if err := os.WriteFile(file, []byte(c.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			var out, errb bytes.Buffer
			code := run(context.Background(), []string{"check", "--config", file}, nil, &out, &errb)
			if code != c.want {
				t.Fatalf("exit %d, want %d; stdout %q stderr %q", code, c.want, out.String(), errb.String())
			}
			want := strings.ReplaceAll(c.inErr, "FILE", file)
			if (want == "" && errb.Len() != 0) || !strings.Contains(errb.String(), want) {
				t.Errorf("stderr %q, want %q", errb.String(), want)
			}
		})
	}
}

// A bad decision API token is an error naming the key, never the token.
func TestCheckRefusesAShortDecisionAPIToken(t *testing.T) {
	file := filepath.Join(t.TempDir(), "rl.yaml")
	if err := os.WriteFile(file, []byte("server: {check_api: {tokens: \"orders:tooshort\"}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"check", "--config", file}, nil, &out, &errb); code != exitFailure {
		t.Fatalf("exit %d, want %d", code, exitFailure)
	}
	if !strings.Contains(errb.String(), "server.check_api: tokens entry 1: token \"orders\": shorter than 16 characters") || strings.Contains(errb.String(), "tooshort") {
		t.Errorf("stderr %q, want the key and entry named and the token not shown", errb.String())
	}
}
