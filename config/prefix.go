package config

import (
	"fmt"
	"slices"
	"strings"

	"github.com/rl-exporter/rl-exporter/httplimit"
)

// DefaultCheckAPIPrefix is server.check_api.prefix's default.
const DefaultCheckAPIPrefix = httplimit.DecisionAPIPrefix

// prefixProblem says what is wrong with a decision API prefix, or "".
func prefixProblem(p string) string {
	switch {
	case !strings.HasPrefix(p, "/") || !strings.HasSuffix(p, "/"):
		return "want a path that starts and ends with /, such as /v1/ or /ratelimit/"
	case strings.ContainsAny(p, "?#%{} \t"):
		return "want a plain path: no ?, #, %, braces or spaces"
	case strings.Contains(p, "//") || slices.Contains(strings.Split(p, "/"), "..") || slices.Contains(strings.Split(p, "/"), "."):
		return "want a clean path: no empty, . or .. segments"
	}
	return ""
}

// shadowedRoutes finds the class routes under server.check_api.prefix: rl-exporter answers the
// decision API's paths there itself, and an upstream's API under the same prefix (an
// OpenAI-style /v1/) may have paths of those names. One finding names them all.
func (c *Config) shadowedRoutes() []Finding {
	a := c.Server.CheckAPI
	if !a.Enabled || a.Prefix == "" {
		return nil
	}
	var under []string
	for _, name := range c.ClassNames() {
		for i, r := range c.Classes[name].Routes {
			path := r
			if _, p, ok := strings.Cut(r, " "); ok {
				path = p
			}
			if i := strings.IndexByte(path, '/'); i > 0 { // a host: example.com/v1/
				path = path[i:]
			}
			if strings.HasPrefix(path, a.Prefix) {
				under = append(under, fmt.Sprintf("classes.%s.routes[%d] %q", name, i, r))
			}
		}
	}
	if len(under) == 0 {
		return nil
	}
	return []Finding{{Key: "server.check_api.prefix", Message: fmt.Sprintf(
		"%s: %s %s under it, where rl-exporter answers its decision API (%scheck, %scommit, %susage, %sauth, …) itself and never proxies those paths; if the upstream serves one of them, move the prefix to a path of its own (prefix: /ratelimit/)",
		a.Prefix, strings.Join(under, ", "), map[bool]string{true: "is", false: "are"}[len(under) == 1], a.Prefix, a.Prefix, a.Prefix, a.Prefix)}}
}
