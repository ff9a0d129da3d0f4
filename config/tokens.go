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
	entries, err := c.tokenEntries(c.Admin.TokensFile, c.Admin.Tokens, []string{"name", "role", "token"})
	if err != nil {
		return nil, err
	}
	var out []AdminToken
	for _, e := range entries {
		t, err := newToken(e.fields[0], e.fields[1], e.fields[2])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", e.where, err)
		}
		out = append(out, t)
	}
	if err := distinctTokens(out); err != nil {
		return nil, err
	}
	return out, nil
}

// CheckAPITokens returns the bearer tokens of the decision API, from
// server.check_api.tokens_file ("<name> <token>" lines) and
// server.check_api.tokens ("<name>:<token>", comma-separated), reading
// the file. None means the decision API asks for no token. Errors name
// the file and line or the entry, never the token.
func (c *Config) CheckAPITokens() ([]AdminToken, error) {
	a := c.Server.CheckAPI
	entries, err := c.tokenEntries(a.TokensFile, a.Tokens, []string{"name", "token"})
	if err != nil {
		return nil, err
	}
	var out []AdminToken
	for _, e := range entries {
		// A decision API token only decides; read-only is the role
		// nearest to that, and it opens nothing on the admin listener,
		// whose tokens are its own.
		t, err := newToken(e.fields[0], string(RoleReadOnly), e.fields[1])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", e.where, err)
		}
		out = append(out, t)
	}
	if err := distinctTokens(out); err != nil {
		return nil, err
	}
	return out, nil
}

// tokenEntry is one token's fields and where it was read, for errors.
type tokenEntry struct {
	fields []string
	where  string
}

// tokenEntries reads the tokens of file (one per line, fields separated
// by spaces, '#' starting a comment) and of inline (comma-separated
// entries, fields separated by ':'), each with the fields named.
func (c *Config) tokenEntries(file string, inline Secret, names []string) ([]tokenEntry, error) {
	var out []tokenEntry
	if file != "" {
		b, err := os.ReadFile(c.Path(file))
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
			where := fmt.Sprintf("tokens_file %s line %d", file, n)
			if len(fields) != len(names) {
				return nil, fmt.Errorf("%s: want \"<%s>\", got %d fields", where, strings.Join(names, "> <"), len(fields))
			}
			out = append(out, tokenEntry{fields, where})
		}
	}
	if s := inline.Reveal(); s != "" {
		for i, entry := range strings.Split(s, ",") {
			where := fmt.Sprintf("tokens entry %d", i+1)
			parts := strings.SplitN(strings.TrimSpace(entry), ":", len(names))
			if len(parts) != len(names) {
				return nil, fmt.Errorf("%s: want \"<%s>\"", where, strings.Join(names, ">:<"))
			}
			out = append(out, tokenEntry{parts, where})
		}
	}
	return out, nil
}

// distinctTokens reports a name or a token used twice.
func distinctTokens(list []AdminToken) error {
	names := map[string]bool{}
	secrets := map[Secret]string{}
	for _, t := range list {
		if names[t.Name] {
			return fmt.Errorf("token name %q used twice", t.Name)
		}
		names[t.Name] = true
		if other, dup := secrets[t.Token]; dup {
			return fmt.Errorf("tokens %q and %q are the same token", other, t.Name)
		}
		secrets[t.Token] = t.Name
	}
	return nil
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
