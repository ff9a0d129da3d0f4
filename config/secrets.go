package config

import (
	"fmt"
	"maps"
	"os"
	"runtime"
	"slices"
)

// SecretFile is a file named by the config that holds a secret.
type SecretFile struct {
	// Key is the config key naming the file ("admin.tokens_file").
	Key string
	// Path is the file, as resolved against the config's directory.
	Path string
}

// SecretFiles lists the files of c that hold secrets: admin tokens,
// Redis passwords, private keys and the JWT secret. Certificates, CAs and
// public keys are not secrets and are not listed.
func (c *Config) SecretFiles() []SecretFile {
	var out []SecretFile
	add := func(key, path string) {
		if path != "" {
			out = append(out, SecretFile{Key: key, Path: c.Path(path)})
		}
	}
	add("admin.tokens_file", c.Admin.TokensFile)
	add("store.redis.password_file", c.Store.Redis.PasswordFile)
	add("store.redis.tls.key_file", c.Store.Redis.TLS.KeyFile)
	add("identity.jwt.secret_file", c.Identity.JWT.SecretFile)
	add("server.grpc_tls.key_file", c.Server.GRPCTLS.KeyFile)
	for _, name := range slices.Sorted(maps.Keys(c.Region.Peers)) {
		p := c.Region.Peers[name]
		add("region.peers."+name+".password_file", p.PasswordFile)
		add("region.peers."+name+".tls.key_file", p.TLS.KeyFile)
	}
	return out
}

// LooseSecretFiles returns one problem per secret file (SecretFiles) that
// its group or other users may read or write, naming the key, the file and
// its mode. A file that cannot be stat'ed is left to the load, which
// reports it. On Windows, where the mode bits mean little, it returns none.
func (c *Config) LooseSecretFiles() []error {
	var out []error
	for _, f := range c.SecretFiles() {
		fi, err := os.Stat(f.Path)
		if err != nil {
			continue
		}
		if m := fi.Mode().Perm(); m&0o077 != 0 && runtime.GOOS != "windows" {
			out = append(out, fmt.Errorf("config %s: %s: %s has mode %04o, readable beyond its owner; chmod 600 it",
				c.Source, f.Key, f.Path, m))
		}
	}
	return out
}
