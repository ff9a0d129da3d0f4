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
// identity headers believed from a gateway that may pass on its clients' own,
// and an admin listener on other interfaces without admin tokens. It reads
// the token files.
func (c *Config) Exposure() []Finding {
	var out []Finding
	if f, ok := c.checkAPIExposure(); ok {
		out = append(out, f)
	}
	out = append(out, c.shadowedRoutes()...)
	out = append(out, c.identityHeaderExposure()...)
	out = append(out, c.listFindings()...)
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

// identityHeaderExposure names each header believed from
// identity.trusted_header_peers. Those peers are gateways or services in
// front, and rl-exporter cannot see whether one of them clears or sets the
// header rather than passing on its client's own copy, which would let a
// client choose its own key or tier: every such header is named, with what
// the peer must do.
func (c *Config) identityHeaderExposure() []Finding {
	if len(c.Identity.TrustedHeaderPeers) == 0 {
		return nil
	}
	peers := strings.Join(c.Identity.TrustedHeaderPeers, ", ")
	var out []Finding
	for _, h := range []struct{ key, name, gives string }{
		{"identity.user_header", c.Identity.UserHeader, "its key (and spend another user's budget, or put that user in the penalty box)"},
		{"tiers.header", c.Tiers.Header, "its plan tier"},
	} {
		if h.name == "" {
			continue
		}
		out = append(out, Finding{Key: h.key, Message: fmt.Sprintf(
			"%s is believed from identity.trusted_header_peers (%s): a gateway there that passes on a client's own %s lets the client choose %s; make every such peer clear or set it (examples/nginx/nginx.conf, Caddyfile.forward-auth and traefik-forward-auth.yaml clear it)",
			h.name, peers, h.name, h.gives)})
	}
	return out
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
