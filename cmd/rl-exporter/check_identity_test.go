package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// check warns, naming the key, of each identity header believed from
// identity.trusted_header_peers: a gateway there that passed on its
// client's own X-Plan-Tier or X-User-ID would let the client pick its tier
// or spend another user's budget.
func TestCheckWarnsOfIdentityHeadersBelievedFromTrustedPeers(t *testing.T) {
	for _, c := range []struct {
		name, yaml string
		want       []string // warnings; none when empty
	}{
		{"both headers from a gateway", "identity: {user_header: X-User-ID, trusted_header_peers: [127.0.0.1/32]}\ntiers: {names: [free, pro], default: free, header: X-Plan-Tier}\n",
			[]string{
				"warning: config FILE: identity.user_header: X-User-ID is believed from identity.trusted_header_peers (127.0.0.1/32): a gateway there that passes on a client's own X-User-ID lets the client choose its key",
				"warning: config FILE: tiers.header: X-Plan-Tier is believed from identity.trusted_header_peers (127.0.0.1/32): a gateway there that passes on a client's own X-Plan-Tier lets the client choose its plan tier",
			}},
		{"the tier header alone", "identity: {trusted_header_peers: [10.0.0.5]}\ntiers: {names: [free, pro], default: free, header: X-Plan-Tier}\n",
			[]string{"tiers.header: X-Plan-Tier is believed from identity.trusted_header_peers (10.0.0.5)"}},
		{"trusted peers with no header to believe", "identity: {trusted_header_peers: [10.0.0.5]}\n", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "rl.yaml")
			if err := os.WriteFile(file, []byte(c.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			var out, errb bytes.Buffer
			if code := run(context.Background(), []string{"check", "--config", file}, nil, &out, &errb); code != exitOK {
				t.Fatalf("exit %d, want %d (a warning); stderr %q", code, exitOK, errb.String())
			}
			if len(c.want) == 0 && errb.Len() != 0 {
				t.Errorf("stderr %q, want no warning", errb.String())
			}
			for _, w := range c.want {
				if w = strings.ReplaceAll(w, "FILE", file); !strings.Contains(errb.String(), w) {
					t.Errorf("stderr %q, want %q", errb.String(), w)
				}
			}
		})
	}
}
