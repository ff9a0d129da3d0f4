package config

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// Finding is a way a config that loads exposes what it should not: check
// reports it (and refuses the config when Refuse is set), serve logs it as
// a warning at start. Key is the config key to change.
type Finding struct {
	Key     string
	Message string
	// Refuse makes check fail; serve still starts (the setting is allowed,
	// but check is where a deployment is vetted).
	Refuse bool
}

func (f Finding) String() string { return f.Key + ": " + f.Message }

// Exposure returns the findings of c, which Validate has accepted: the
// decision API reachable through a proxy or from other hosts without a
// token, class routes the decision API's prefix may take from the upstream,
// and an admin listener on other interfaces without admin tokens.
// It reads the token files.
func (c *Config) Exposure() []Finding {
	var out []Finding
	if f, ok := c.checkAPIExposure(); ok {
		out = append(out, f)
	}
	out = append(out, c.shadowedRoutes()...)
	if a := c.Server.AdminListen; a != "" && !loopbackAddr(a) {
		if toks, err := c.AdminTokens(); err == nil && len(toks) == 0 {
			out = append(out, Finding{Key: "server.admin_listen", Refuse: true, Message: fmt.Sprintf(
				"%q listens beyond this host and admin.tokens_file and admin.tokens are empty: set admin tokens, or listen on 127.0.0.1", a)})
		}
	}
	return out
}

// checkAPIExposure says whether the decision API, which believes the key
// and plan tier of its body, answers more than this host's own services
// without a token.
func (c *Config) checkAPIExposure() (Finding, bool) {
	a := c.Server.CheckAPI
	if !a.Enabled {
		return Finding{}, false
	}
	if toks, err := c.CheckAPITokens(); err != nil || len(toks) > 0 {
		return Finding{}, false
	}
	peers, err := c.CheckAPIPeers()
	if err != nil {
		return Finding{}, false
	}
	proxies, _ := prefixes("identity.trusted_proxies", c.Identity.TrustedProxies)
	var why []string
	for _, p := range peers {
		for _, t := range proxies {
			if p.Overlaps(t) {
				why = append(why, fmt.Sprintf("%s holds identity.trusted_proxies %s: a proxy there forwards its clients, every one of whom may then call it", p, t))
			}
		}
		if !p.Addr().IsLoopback() || p.Bits() < loopbackBits(p.Addr()) {
			why = append(why, fmt.Sprintf("%s is not this host", p))
		}
	}
	if len(why) == 0 {
		return Finding{}, false
	}
	return Finding{Key: "server.check_api.allowed_peers", Message: fmt.Sprintf(
		"the decision API, which believes the key and plan_tier of any caller, answers without a token: %s; set server.check_api.tokens_file (or tokens), or list only the services that call it",
		strings.Join(why, "; "))}, true
}

// loopbackBits is the shortest prefix length of addr's family that holds
// only loopback addresses: 8 (127.0.0.0/8) or 128 (::1).
func loopbackBits(addr netip.Addr) int {
	if addr.Unmap().Is4() {
		return 8
	}
	return 128
}

// loopbackAddr says whether the listen address a (host:port) binds only
// this host: a loopback IP or localhost. An empty host binds every
// interface; any other name may resolve beyond this host.
func loopbackAddr(a string) bool {
	host, _, err := net.SplitHostPort(a)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}
