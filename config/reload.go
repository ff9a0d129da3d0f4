package config

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/knadh/koanf/parsers/yaml"
)

// CheckReload returns why new must not replace old on a reload, or nil.
// Load validates a config on its own; these are the changes that are valid
// at a start but surprising in a running server, where they would be taken
// silently:
//
//   - a config file with no keys (empty, or only whitespace and comments),
//     which would put the built-in defaults in force in place of every
//     limit, tier, API key and trusted peer of the file, as a truncated
//     write or a bad deploy leaves it;
//   - a file that no longer has classes, which would replace every limit
//     of the file by the built-in class;
//   - a change of where the client's identity comes from
//     (IdentitySourceKeys), which re-keys every client at once: each gets a
//     fresh budget. It needs a restart, planned as such.
//
// The error names the file and every reason, one per line. old and new are
// only read.
func CheckReload(old, new *Config) error {
	var out []error
	if new.emptyFile {
		out = append(out, fmt.Errorf("config %s: the file has no keys (empty, or only comments); refusing to replace the running config by the built-in defaults", new.Source))
	} else if new.classesBuiltIn && !old.classesBuiltIn {
		out = append(out, fmt.Errorf("config %s: classes: none in the file; refusing to replace every limit by the built-in class", new.Source))
	}
	for _, key := range changedIdentitySource(old, new) {
		out = append(out, fmt.Errorf("config %s: %s: changed; where the client's identity comes from is not changed by a reload (every client would be keyed afresh): restart to apply it", new.Source, key))
	}
	return errors.Join(out...)
}

// identitySource are the keys that say where the client's identity (its
// address) comes from, each with how to compare two configs' values.
var identitySource = []struct {
	key   string
	equal func(a, b *Config) bool
}{
	{"identity.trusted_proxies", func(a, b *Config) bool { return sameSet(a.Identity.TrustedProxies, b.Identity.TrustedProxies) }},
	{"identity.client_ip_header", func(a, b *Config) bool {
		return http.CanonicalHeaderKey(a.Identity.ClientIPHeader) == http.CanonicalHeaderKey(b.Identity.ClientIPHeader)
	}},
	{"identity.trusted_hops", func(a, b *Config) bool { return a.Identity.TrustedHops == b.Identity.TrustedHops }},
}

// IdentitySourceKeys are the keys CheckReload refuses to change on a reload.
func IdentitySourceKeys() []string {
	out := make([]string, len(identitySource))
	for i, s := range identitySource {
		out[i] = s.key
	}
	return out
}

// changedIdentitySource lists the identity source keys whose value differs.
func changedIdentitySource(old, new *Config) []string {
	var out []string
	for _, s := range identitySource {
		if !s.equal(old, new) {
			out = append(out, s.key)
		}
	}
	return out
}

// sameSet reports whether a and b hold the same strings, in any order.
func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}

// EmptyFile reports whether the config was loaded from a file that has no
// keys (empty, or only whitespace and comments): it holds the built-in
// defaults. A start accepts it (serve logs a warning); a reload refuses it.
func (c *Config) EmptyFile() bool { return c.emptyFile }

// hasNoKeys reports whether YAML data sets no key.
func hasNoKeys(data []byte) bool {
	if strings.TrimSpace(string(data)) == "" {
		return true
	}
	m, err := yaml.Parser().Unmarshal(data)
	return err == nil && len(m) == 0
}
