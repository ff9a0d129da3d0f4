package config

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strings"

	"github.com/rl-exporter/rl-exporter/httplimit"
)

// Role is what an admin token may do.
type Role string

// The admin token roles.
const (
	// RoleReadOnly may read the limits in force and the live changes.
	RoleReadOnly Role = "read-only"
	// RoleReadWrite may also change them.
	RoleReadWrite Role = "read-write"
)

// minTokenLen is the shortest admin token accepted: shorter ones can be guessed.
const minTokenLen = 16

// AdminToken is one bearer token of the admin API. The token itself is a
// Secret; Name is what the audit log shows.
type AdminToken struct {
	Name  string
	Role  Role
	Token Secret
}

// AdminTokens returns the admin tokens of admin.tokens_file and
// admin.tokens, reading the file. None means the admin API is off. Errors
// name the file and line or the entry, never the token.
func (c *Config) AdminTokens() ([]AdminToken, error) {
	var out []AdminToken
	if f := c.Admin.TokensFile; f != "" {
		b, err := os.ReadFile(c.Path(f))
		if err != nil {
			return nil, fmt.Errorf("tokens_file: %w", err)
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for n := 1; sc.Scan(); n++ {
			line := strings.TrimSpace(sc.Text())
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			fields := strings.Fields(line)
			if len(fields) != 3 {
				return nil, fmt.Errorf("tokens_file %s line %d: want \"<name> <role> <token>\", got %d fields", f, n, len(fields))
			}
			t, err := newToken(fields[0], fields[1], fields[2])
			if err != nil {
				return nil, fmt.Errorf("tokens_file %s line %d: %w", f, n, err)
			}
			out = append(out, t)
		}
	}
	if s := c.Admin.Tokens.Reveal(); s != "" {
		for i, entry := range strings.Split(s, ",") {
			parts := strings.SplitN(strings.TrimSpace(entry), ":", 3)
			if len(parts) != 3 {
				return nil, fmt.Errorf("tokens entry %d: want \"<name>:<role>:<token>\"", i+1)
			}
			t, err := newToken(parts[0], parts[1], parts[2])
			if err != nil {
				return nil, fmt.Errorf("tokens entry %d: %w", i+1, err)
			}
			out = append(out, t)
		}
	}
	names := map[string]bool{}
	secrets := map[Secret]string{}
	for _, t := range out {
		if names[t.Name] {
			return nil, fmt.Errorf("token name %q used twice", t.Name)
		}
		names[t.Name] = true
		if other, dup := secrets[t.Token]; dup {
			return nil, fmt.Errorf("tokens %q and %q are the same token", other, t.Name)
		}
		secrets[t.Token] = t.Name
	}
	return out, nil
}

func newToken(name, role, token string) (AdminToken, error) {
	if !httplimit.ValidName(name) {
		return AdminToken{}, fmt.Errorf("token name %q: letters, digits, '_' and '-' only", name)
	}
	r := Role(role)
	if r != RoleReadOnly && r != RoleReadWrite {
		return AdminToken{}, fmt.Errorf("token %q: role %q: want read-only or read-write", name, role)
	}
	if len(token) < minTokenLen {
		return AdminToken{}, fmt.Errorf("token %q: shorter than %d characters", name, minTokenLen)
	}
	return AdminToken{Name: name, Role: r, Token: Secret(token)}, nil
}
