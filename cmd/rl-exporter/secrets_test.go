package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A Redis URL whose password url.Parse cannot read is refused by serve
// and check without its password in the message, whether it came from
// --redis-url, the file or RL_STORE__REDIS__URL.
func TestARedisPasswordIsInNoErrorOfServeOrCheck(t *testing.T) {
	for _, c := range []struct{ url, password string }{
		{"redis://default:Tr0ub4dor%3&3@127.0.0.1:1", "Tr0ub4dor"},
		{"redis://default:s3cr#t-pass@127.0.0.1:1/0", "s3cr"},
		{"redis://default:pa%zzword@127.0.0.1:1", "pa%zzword"},
	} {
		dir := t.TempDir()
		file := filepath.Join(dir, "redis.yaml")
		if err := os.WriteFile(file, []byte("store: {type: redis, redis: {url: '"+c.url+"'}}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, r := range []struct {
			name string
			args []string
			env  environ
		}{
			{"serve --redis-url", []string{"serve", "--redis-url", c.url, "--listen", "127.0.0.1:0"}, nil},
			{"serve with the file", []string{"serve", "--config", file, "--listen", "127.0.0.1:0"}, nil},
			{"serve with RL_STORE__REDIS__URL", []string{"serve", "--listen", "127.0.0.1:0"}, environ{"RL_STORE__TYPE=redis", "RL_STORE__REDIS__URL=" + c.url}},
			{"check", []string{"check", "--config", file}, nil},
		} {
			t.Run(r.name+" "+c.url, func(t *testing.T) {
				var out, errb bytes.Buffer
				code := run(context.Background(), r.args, r.env, &out, &errb)
				if code != exitFailure {
					t.Fatalf("exit %d, want %d; stderr %q", code, exitFailure, errb.String())
				}
				all := out.String() + errb.String()
				if strings.Contains(all, c.password) {
					t.Errorf("the password %q is in the output:\n%s", c.password, all)
				}
				if !strings.Contains(errb.String(), "store.redis.url") {
					t.Errorf("the error does not name store.redis.url:\n%s", errb.String())
				}
			})
		}
	}
}
