package config

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

const reloadBase = `
tiers: {names: [free, pro], default: free, api_keys: {pro: [k-0123456789abcdef]}}
identity: {trusted_proxies: [10.0.0.0/8, 192.168.0.0/16]}
classes:
  api:
    limits: {free: {algorithm: fixed_window, rate: 5, period: 1m}}
`

// loadFile writes content to the config file at path and loads it as serve does.
func loadFile(t *testing.T, path, content string) (*Config, error) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return Sources{File: path}.Load()
}

func TestAReloadThatWouldDropTheFileOrItsIdentitySourceIsRefusedNamingTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rl.yaml")
	old, err := loadFile(t, path, reloadBase)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, content, want string }{
		{"an emptied file", "", "no keys"},
		{"a file of whitespace", " \n   \n", "no keys"},
		{"a file of comments", "# all gone\n\n# really\n", "no keys"},
		{"a file without classes", "tiers: {names: [free], default: free}\nidentity: {trusted_proxies: [10.0.0.0/8, 192.168.0.0/16]}\n", "classes: none in the file"},
		{"another trusted proxy", strings.Replace(reloadBase, "192.168.0.0/16", "0.0.0.0/0", 1), "identity.trusted_proxies: changed"},
		{"no trusted proxy", strings.Replace(reloadBase, "identity: {trusted_proxies: [10.0.0.0/8, 192.168.0.0/16]}\n", "", 1), "identity.trusted_proxies: changed"},
		{"another client address header", strings.Replace(reloadBase, "identity: {trusted_proxies: [10.0.0.0/8, 192.168.0.0/16]}", "identity: {trusted_proxies: [10.0.0.0/8, 192.168.0.0/16], client_ip_header: X-Real-IP}", 1), "identity.client_ip_header: changed"},
		{"a count of trusted hops", strings.Replace(reloadBase, "identity: {trusted_proxies: [10.0.0.0/8, 192.168.0.0/16]}", "identity: {trusted_proxies: [10.0.0.0/8, 192.168.0.0/16], trusted_hops: 2}", 1), "identity.trusted_hops: changed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			nw, err := loadFile(t, path, c.content)
			if err != nil {
				t.Fatalf("the file does not load on its own: %v", err)
			}
			err = CheckReload(old, nw)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("CheckReload: %v; want an error naming %s and %q", err, path, c.want)
			}
		})
	}
	t.Run("a change of limits, or the proxies in another order", func(t *testing.T) {
		edit := strings.Replace(strings.Replace(reloadBase, "rate: 5", "rate: 8", 1), "[10.0.0.0/8, 192.168.0.0/16]", "[192.168.0.0/16, 10.0.0.0/8]", 1)
		nw, err := loadFile(t, path, edit)
		if err != nil {
			t.Fatal(err)
		}
		if err := CheckReload(old, nw); err != nil {
			t.Errorf("CheckReload refused an ordinary edit: %v", err)
		}
	})
	t.Run("a start on an empty file is the built-in defaults, marked as such", func(t *testing.T) {
		c, err := loadFile(t, path, "# nothing yet\n")
		if err != nil {
			t.Fatal(err)
		}
		if !c.EmptyFile() || !reflect.DeepEqual(c.Classes["default"].Limits["default"], builtInLimit) {
			t.Errorf("EmptyFile %v, classes %+v", c.EmptyFile(), c.Classes)
		}
		if d, _ := loadFile(t, path, reloadBase); d.EmptyFile() {
			t.Error("a file with keys is marked empty")
		}
	})
}

func TestIdentitySourceKeysAreConfigKeys(t *testing.T) {
	for _, key := range IdentitySourceKeys() {
		if _, err := typeAt(reflect.TypeOf(Config{}), strings.Split(key, ".")); err != nil {
			t.Errorf("%s is not a key of the config: %v", key, err)
		}
	}
}

func TestSecretFilesReadableByOthersAreNamedWithTheirMode(t *testing.T) {
	dir := t.TempDir()
	tokens := writeFile(t, dir, "tokens", "ops read-write 0123456789abcdef-rw\n")
	password := writeFile(t, dir, "redis-password", "hunter2\n")
	conf := []byte("admin: {tokens_file: tokens}\nstore: {type: redis, redis: {url: \"redis://127.0.0.1:1/0\", password_file: redis-password}}\n")
	for _, mode := range []os.FileMode{0o644, 0o640} {
		for _, f := range []string{tokens, password} {
			if err := os.Chmod(f, mode); err != nil {
				t.Fatal(err)
			}
		}
		c, err := Parse(filepath.Join(dir, "rl.yaml"), conf)
		if err != nil {
			t.Fatal(err)
		}
		got := c.LooseSecretFiles()
		if len(got) != 2 {
			t.Fatalf("mode %04o: %d problems, want 2: %v", mode, len(got), got)
		}
		for i, want := range []struct{ key, path string }{{"admin.tokens_file", tokens}, {"store.redis.password_file", password}} {
			msg := got[i].Error()
			if !strings.Contains(msg, want.key) || !strings.Contains(msg, want.path) || !strings.Contains(msg, fmt.Sprintf("mode %04o", mode)) {
				t.Errorf("mode %04o: %q does not name %s, %s and the mode", mode, msg, want.key, want.path)
			}
		}
	}
	for _, f := range []string{tokens, password} {
		if err := os.Chmod(f, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c, err := Parse(filepath.Join(dir, "rl.yaml"), conf)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.LooseSecretFiles(); len(got) != 0 {
		t.Errorf("files at 0600: %v", got)
	}
}
