package httplimit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/textproto"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// IdentityConfig says how the client of a request is identified and which
// plan tier it is on. The zero value keys every request by its direct peer's
// IP address and puts it on the default tier.
//
// Identities are tried in this order: an Identity in the request context
// (set with WithIdentity by a Go service that authenticated the request),
// the JWT's sub claim (when JWT is set and the request carries a token; a
// token that fails verification makes the request keyed by IP, whatever
// else it carries), UserHeader (only from a TrustedHeaderPeers peer),
// APIKeyHeader (a key listed in TierByAPIKey, or any key with
// AllowUnknownAPIKeys), and finally the client IP.
//
// User ids and API keys are separate namespaces: user ids (context
// identities, JWT subjects, UserHeader) are looked up in TierByKey and keyed
// as "user:<id>", API keys in TierByAPIKey and keyed as "apikey:<hash>", so
// an API key that happens to equal a user id gets neither that user's tier
// nor that user's budget.
//
// Headers that name the client or its tier without proving anything
// (UserHeader, TierHeader, ClientIPHeader) are believed only from the
// peers listed for them; API keys and verified JWTs are credentials the
// client presents itself and count from any peer.
type IdentityConfig struct {
	// TrustedProxies are the networks whose ClientIPHeader is believed.
	// From any other peer it is ignored, so a client cannot choose its own
	// key.
	TrustedProxies []netip.Prefix
	// ClientIPHeader names the one header a TrustedProxies peer gives the
	// client's address in; no other header is read for it. Empty means
	// "X-Forwarded-For". It is one of:
	//   - "X-Forwarded-For", a list each proxy appends its peer's address
	//     to, walked from the right (see TrustedHops);
	//   - "Forwarded" (RFC 7239), its for= parameters walked the same way;
	//     only for proxies that append to it, since a load balancer that
	//     appends X-Forwarded-For passes a client's Forwarded through;
	//   - any other header, holding exactly one address that the proxy
	//     overwrites ("X-Real-IP", "CF-Connecting-IP", "True-Client-IP").
	//     A request carrying it more than once is keyed by its peer.
	// A value that is not an address ("unknown", an obfuscated "_hidden",
	// an element without for=) keys the request by its direct peer: the
	// one address no header chose.
	ClientIPHeader string
	// TrustedHops, when above 0, counts the proxies in front of the direct
	// peer instead of matching their addresses, as Envoy's
	// xff_num_trusted_hops does: the client is the (TrustedHops+1)th
	// address from the right of a list header, and a list shorter than
	// that keys the request by its direct peer. 0 (the default) walks from
	// the right past every address in TrustedProxies; when all of them
	// are, the leftmost is the client. Only list headers have hops.
	TrustedHops int
	// IPv4Prefix and IPv6Prefix are how many leading bits of a client's
	// address identify it: every address of one network shares one budget
	// ("ip:2001:db8:1:2::/64"), so that a client holding a network cannot
	// rotate addresses within it for fresh budgets. 0 means the defaults,
	// DefaultIPv4Prefix (32: one address, keyed "ip:192.0.2.1") and
	// DefaultIPv6Prefix (64: the smallest network an IPv6 client is
	// assigned, its addresses chosen by the client itself). Zones are
	// dropped: fe80::1%a and fe80::1%b are one client.
	IPv4Prefix, IPv6Prefix int
	// TrustedHeaderPeers are the networks whose UserHeader and TierHeader
	// are believed: the gateways that authenticate clients and overwrite
	// whatever a client sent in those headers. The direct peer must be in
	// one of them; from any other peer the headers are ignored, as if
	// absent, so a client cannot spend another user's budget or claim a
	// better tier. It is a list of its own rather than TrustedProxies: a
	// proxy can be trusted with X-Forwarded-For because it appends the
	// address it saw, which every load balancer does, but a header is safe
	// only from a peer that overwrites it, which only the authenticating
	// gateway does. NewPolicy refuses UserHeader or TierHeader without it,
	// since they could never be believed.
	TrustedHeaderPeers []netip.Prefix
	// UserHeader names a header carrying an authenticated user id, set by a
	// gateway in TrustedHeaderPeers that overwrites whatever the client
	// sent (X-User-ID).
	UserHeader string
	// APIKeyHeader names a header carrying the client's API key (X-API-Key).
	// Keys are hashed before they become part of a limiter key.
	APIKeyHeader string
	// AllowUnknownAPIKeys makes any API key an identity of its own. By
	// default (false) only the keys listed in TierByAPIKey are: a request
	// with another key is keyed by its client address, so that a client
	// cannot escape its limit by inventing or rotating keys.
	AllowUnknownAPIKeys bool
	// JWT, when set, verifies bearer tokens and keys clients by their sub claim.
	JWT *JWTConfig
	// TierHeader names a header carrying the plan tier (X-Plan-Tier), set
	// by a gateway in TrustedHeaderPeers; from other peers the tier comes
	// from TierByKey or is the default tier.
	TierHeader string
	// TierByKey maps user ids and JWT subjects to plan tiers. API keys are
	// never looked up in it.
	TierByKey map[string]string
	// TierByAPIKey maps API keys to plan tiers; its keys are the known API
	// keys. User ids are never looked up in it.
	TierByAPIKey map[string]string
}

// JWTConfig verifies JSON Web Tokens. Exactly one algorithm is accepted.
type JWTConfig struct {
	// Header carries the token; default "Authorization", with the "Bearer " scheme.
	Header string
	// Algorithm is the only accepted signing algorithm: HS256, HS384,
	// HS512, RS256, RS384, RS512, ES256, ES384 or ES512.
	Algorithm string
	// Secret is the HMAC secret for HS* algorithms.
	Secret []byte
	// PublicKeyPEM is the PEM public key for RS* and ES* algorithms.
	PublicKeyPEM []byte
	// Issuer and Audience, when set, must match the token's iss and aud.
	Issuer, Audience string
	// Leeway tolerates clock skew on exp and nbf.
	Leeway time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Identity is a client identity verified by the caller. It is a plain value.
type Identity struct {
	// Key identifies the client (a user or account id); required.
	Key string
	// Tier is the client's plan tier; unknown or empty means the default tier.
	Tier string
}

type identityKey struct{}

// WithIdentity returns a context carrying id, for Go services that
// authenticate requests before the middleware runs. It takes precedence over
// every header.
func WithIdentity(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// IdentityFrom returns the Identity set by WithIdentity, if any.
func IdentityFrom(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok && id.Key != ""
}

type identity struct {
	cfg    IdentityConfig
	jwt    *jwt.Parser
	jwtKey any
	jwtHdr string
	// ipHdr is ClientIPHeader in canonical form, as the request's Header
	// map holds it; ipList says it is a list (X-Forwarded-For or
	// Forwarded), forwarded that it is Forwarded.
	ipHdr             string
	ipList, forwarded bool
	// v4Bits and v6Bits are the prefix lengths that key an address.
	v4Bits, v6Bits int
}

// The address grouping of IdentityConfig: the defaults, and the shortest
// prefixes allowed. A shorter prefix would span the networks of many
// unrelated clients (an IPv4 /16 is the largest block one organisation is
// commonly assigned; an IPv6 /32 is the least a registry allocates to one
// provider), making one bucket that any of them can spend for all; a class
// with Shared is the way to one budget for everyone.
const (
	DefaultIPv4Prefix = 32
	DefaultIPv6Prefix = 64
	MinIPv4Prefix     = 16
	MinIPv6Prefix     = 32
)

// DefaultClientIPHeader is the header read for the client's address when
// IdentityConfig.ClientIPHeader is empty.
const DefaultClientIPHeader = "X-Forwarded-For"

// ValidHeaderName reports whether s is an HTTP field name (an RFC 9110
// token). It is a pure function.
func ValidHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// IsListHeader reports whether the client address header h (any case) is
// a list of hops, X-Forwarded-For or Forwarded, rather than one address.
// It is a pure function.
func IsListHeader(h string) bool {
	return strings.EqualFold(h, "X-Forwarded-For") || strings.EqualFold(h, "Forwarded")
}

// setClientIP checks and compiles the client address settings of cfg.
func (id *identity) setClientIP(cfg IdentityConfig) error {
	h := cfg.ClientIPHeader
	if h == "" {
		h = DefaultClientIPHeader
	}
	if !ValidHeaderName(h) {
		return fmt.Errorf("ClientIPHeader %q is not a header name (letters, digits and !#$%%&'*+-.^_`|~)", h)
	}
	id.ipHdr = textproto.CanonicalMIMEHeaderKey(h)
	id.ipList = IsListHeader(h)
	id.forwarded = strings.EqualFold(h, "Forwarded")
	if cfg.TrustedHops < 0 {
		return fmt.Errorf("TrustedHops %d: must be 0 or more", cfg.TrustedHops)
	}
	if cfg.TrustedHops > 0 && !id.ipList {
		return fmt.Errorf("TrustedHops %d: ClientIPHeader %s holds one address, not a list of hops", cfg.TrustedHops, h)
	}
	if len(cfg.TrustedProxies) == 0 && (cfg.TrustedHops > 0 || !strings.EqualFold(h, DefaultClientIPHeader)) {
		return fmt.Errorf("ClientIPHeader %s is believed only from TrustedProxies, which is empty: list the networks of the proxies that set it", h)
	}
	id.v4Bits, id.v6Bits = cfg.IPv4Prefix, cfg.IPv6Prefix
	if id.v4Bits == 0 {
		id.v4Bits = DefaultIPv4Prefix
	}
	if id.v6Bits == 0 {
		id.v6Bits = DefaultIPv6Prefix
	}
	if id.v4Bits < MinIPv4Prefix || id.v4Bits > 32 {
		return fmt.Errorf("IPv4Prefix %d: must be %d to 32", id.v4Bits, MinIPv4Prefix)
	}
	if id.v6Bits < MinIPv6Prefix || id.v6Bits > 128 {
		return fmt.Errorf("IPv6Prefix %d: must be %d to 128", id.v6Bits, MinIPv6Prefix)
	}
	return nil
}

func newIdentity(cfg IdentityConfig) (*identity, error) {
	id := &identity{cfg: cfg}
	for _, p := range cfg.TrustedProxies {
		if !p.IsValid() {
			return nil, fmt.Errorf("trusted proxy %v: not a valid network", p)
		}
	}
	for _, p := range cfg.TrustedHeaderPeers {
		if !p.IsValid() {
			return nil, fmt.Errorf("trusted header peer %v: not a valid network", p)
		}
	}
	if err := id.setClientIP(cfg); err != nil {
		return nil, err
	}
	if len(cfg.TrustedHeaderPeers) == 0 {
		for _, h := range []struct{ field, name string }{{"UserHeader", cfg.UserHeader}, {"TierHeader", cfg.TierHeader}} {
			if h.name != "" {
				return nil, fmt.Errorf("%s %s is believed only from TrustedHeaderPeers, which is empty: list the networks of the gateways that set it", h.field, h.name)
			}
		}
	}
	if cfg.JWT == nil {
		return id, nil
	}
	j := cfg.JWT
	id.jwtHdr = j.Header
	if id.jwtHdr == "" {
		id.jwtHdr = "Authorization"
	}
	switch {
	case strings.HasPrefix(j.Algorithm, "HS"):
		if len(j.Secret) == 0 {
			return nil, fmt.Errorf("jwt: algorithm %s needs a secret", j.Algorithm)
		}
		id.jwtKey = j.Secret
	case strings.HasPrefix(j.Algorithm, "RS"):
		k, err := jwt.ParseRSAPublicKeyFromPEM(j.PublicKeyPEM)
		if err != nil {
			return nil, fmt.Errorf("jwt: %s public key: %w", j.Algorithm, err)
		}
		id.jwtKey = k
	case strings.HasPrefix(j.Algorithm, "ES"):
		k, err := jwt.ParseECPublicKeyFromPEM(j.PublicKeyPEM)
		if err != nil {
			return nil, fmt.Errorf("jwt: %s public key: %w", j.Algorithm, err)
		}
		id.jwtKey = k
	}
	switch j.Algorithm {
	case "HS256", "HS384", "HS512", "RS256", "RS384", "RS512", "ES256", "ES384", "ES512":
	default:
		return nil, fmt.Errorf("jwt: unsupported algorithm %q (want HS256, HS384, HS512, RS256, RS384, RS512, ES256, ES384 or ES512)", j.Algorithm)
	}
	opts := []jwt.ParserOption{jwt.WithValidMethods([]string{j.Algorithm}), jwt.WithExpirationRequired()}
	if j.Leeway > 0 {
		opts = append(opts, jwt.WithLeeway(j.Leeway))
	}
	if j.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(j.Issuer))
	}
	if j.Audience != "" {
		opts = append(opts, jwt.WithAudience(j.Audience))
	}
	if j.Now != nil {
		opts = append(opts, jwt.WithTimeFunc(j.Now))
	}
	id.jwt = jwt.NewParser(opts...)
	return id, nil
}

// client is who is asking: the key part naming the client, and the tier it
// claims (validated by the Policy).
type client struct {
	key  string
	tier string
}

// MaxUserKey is the longest user id (from the context, a JWT sub or the
// user header) kept verbatim in a limiter key; a longer one is replaced by
// "sha256:" and a hash of it, so that a client sending a huge header cannot
// make the store hold huge keys.
const MaxUserKey = 256

// userKey is the client part of a limiter key for the user id u.
func userKey(u string) string {
	if len(u) <= MaxUserKey {
		return "user:" + u
	}
	sum := sha256.Sum256([]byte(u))
	return "user:sha256:" + hex.EncodeToString(sum[:16])
}

// apiKeyKey is the client part of a limiter key for the API key k: a hash,
// so that keys are not stored in clear, under a prefix of its own, so that
// it never equals the key of a user id or an address.
func apiKeyKey(k string) string {
	sum := sha256.Sum256([]byte(k))
	return "apikey:" + hex.EncodeToString(sum[:8])
}

// resolve identifies the client of r.
func (id *identity) resolve(r *http.Request) client {
	user, headerTier := id.gatewayHeaders(r)
	if ctxID, ok := IdentityFrom(r.Context()); ok {
		return client{key: userKey(ctxID.Key), tier: id.tierOf(headerTier, ctxID.Key, ctxID.Tier)}
	}
	if id.jwt != nil {
		if raw, ok := id.bearer(r); ok {
			sub, err := id.verify(raw)
			if err != nil {
				// Never trusted: key by address, on the default tier.
				return client{key: id.ipKey(id.clientIP(r))}
			}
			return client{key: userKey(sub), tier: id.tierOf(headerTier, sub, "")}
		}
	}
	if user != "" {
		return client{key: userKey(user), tier: id.tierOf(headerTier, user, "")}
	}
	if h := id.cfg.APIKeyHeader; h != "" {
		if v := r.Header.Get(h); v != "" {
			tier, known := id.cfg.TierByAPIKey[v]
			if known || id.cfg.AllowUnknownAPIKeys {
				if headerTier != "" {
					tier = headerTier
				}
				return client{key: apiKeyKey(v), tier: tier}
			}
		}
	}
	return client{key: id.ipKey(id.clientIP(r)), tier: id.tierOf(headerTier, "", "")}
}

// gatewayHeaders returns the user and tier headers of r when its direct
// peer is a trusted header peer, and nothing otherwise: from any other peer
// they are what the client chose to send.
func (id *identity) gatewayHeaders(r *http.Request) (user, tier string) {
	if id.cfg.UserHeader == "" && id.cfg.TierHeader == "" {
		return "", ""
	}
	if !inNetworks(PeerAddr(r.RemoteAddr), id.cfg.TrustedHeaderPeers) {
		return "", ""
	}
	if h := id.cfg.UserHeader; h != "" {
		user = r.Header.Get(h)
	}
	if h := id.cfg.TierHeader; h != "" {
		tier = r.Header.Get(h)
	}
	return user, tier
}

// tierOf picks the tier of a user id: the tier header of a trusted peer
// (headerTier), then the user id→tier lookup, then the tier that came with
// a context identity.
func (id *identity) tierOf(headerTier, key, fallback string) string {
	if headerTier != "" {
		return headerTier
	}
	if key != "" {
		if t, ok := id.cfg.TierByKey[key]; ok {
			return t
		}
	}
	return fallback
}

func (id *identity) bearer(r *http.Request) (string, bool) {
	v := r.Header.Get(id.jwtHdr)
	if v == "" {
		return "", false
	}
	if len(v) > 7 && strings.EqualFold(v[:7], "bearer ") {
		v = strings.TrimSpace(v[7:])
	}
	return v, v != ""
}

var errNoSubject = errors.New("token has no sub claim")

func (id *identity) verify(raw string) (string, error) {
	tok, err := id.jwt.Parse(raw, func(*jwt.Token) (any, error) { return id.jwtKey, nil })
	if err != nil {
		return "", err
	}
	sub, err := tok.Claims.GetSubject()
	if err != nil {
		return "", err
	}
	if sub == "" {
		return "", errNoSubject
	}
	return sub, nil
}

// inNetworks reports whether a is in one of nets; an invalid address (a
// peer that is not an IP, such as a Unix socket) is in none.
func inNetworks(a netip.Addr, nets []netip.Prefix) bool {
	a = a.Unmap()
	for _, p := range nets {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// clientIP is the direct peer's address, or, when the peer is a trusted
// proxy, the client's address as ClientIPHeader gives it (see
// IdentityConfig). Whatever the header holds, the answer is the peer or an
// address a trusted proxy wrote: a value that is no address falls back to
// the peer, never to an address the header named.
func (id *identity) clientIP(r *http.Request) netip.Addr {
	peer := PeerAddr(r.RemoteAddr)
	if !peer.IsValid() || len(id.cfg.TrustedProxies) == 0 || !inNetworks(peer, id.cfg.TrustedProxies) {
		return peer
	}
	values := r.Header[id.ipHdr]
	if !id.ipList {
		if len(values) != 1 {
			return peer // absent, or several: which one the proxy set is unknown
		}
		if a := parseHop(strings.TrimSpace(values[0])); a.IsValid() {
			return a
		}
		return peer
	}
	skip := id.cfg.TrustedHops
	var last netip.Addr // the leftmost trusted hop walked past
	for i := len(values) - 1; i >= 0; i-- {
		v := values[i]
		for v != "" {
			var elem string
			if c := strings.LastIndexByte(v, ','); c >= 0 {
				elem, v = v[c+1:], v[:c]
			} else {
				elem, v = v, ""
			}
			if skip > 0 {
				skip-- // a hop counted as trusted: its content is the proxy's own
				continue
			}
			if id.forwarded {
				elem = forwardedFor(elem)
			}
			a := parseHop(strings.TrimSpace(elem))
			switch {
			case !a.IsValid():
				return peer
			case id.cfg.TrustedHops > 0, !inNetworks(a, id.cfg.TrustedProxies):
				return a
			}
			last = a
		}
	}
	if last.IsValid() {
		// Every hop is a trusted proxy: the leftmost is what the first of
		// them saw, a client inside their networks.
		return last
	}
	return peer // no hops, or fewer than TrustedHops+1
}

// ipKey is the client part of a limiter key for the address a: "ip:" and
// the network of its IPv4Prefix or IPv6Prefix leading bits
// ("ip:2001:db8:1:2::/64"), or the bare address when the prefix is the
// whole address ("ip:192.0.2.1"); the zone is dropped. One allocation.
func (id *identity) ipKey(a netip.Addr) string {
	if !a.IsValid() {
		return "ip:" + a.String()
	}
	a = a.WithZone("")
	bits := id.v4Bits
	if a.Is6() {
		bits = id.v6Bits
	}
	var buf [64]byte
	b := append(buf[:0], "ip:"...)
	if bits >= a.BitLen() {
		b = a.AppendTo(b)
	} else {
		p, _ := a.Prefix(bits) // bits is in range: checked by setClientIP
		b = p.AppendTo(b)
	}
	return string(b)
}

// clientKey is the client part of a limiter key given by a caller (the
// decision API, a reset): an "ip:" key naming one address is grouped as
// the middleware groups that address, so that it names the budget the
// proxy keeps for it; any other key is kept as it is.
func (id *identity) clientKey(key string) string {
	rest, ok := strings.CutPrefix(key, "ip:")
	if !ok {
		return key
	}
	a, err := netip.ParseAddr(rest)
	if err != nil {
		return key
	}
	return id.ipKey(a.Unmap())
}

// PeerAddr is the IP of a connection's remote address (an
// http.Request's RemoteAddr, "host:port"), an IPv4-mapped IPv6 address as
// IPv4; the zero (invalid) Addr when it has none. It is a pure function.
func PeerAddr(remote string) netip.Addr {
	if ap, err := netip.ParseAddrPort(remote); err == nil {
		return ap.Addr().Unmap()
	}
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	a, _ := netip.ParseAddr(strings.Trim(host, "[]"))
	return a.Unmap()
}

// forwardedFor is the for= parameter of one RFC 7239 Forwarded element,
// unquoted; "" when it has none.
func forwardedFor(elem string) string {
	for elem != "" {
		var pair string
		pair, elem, _ = strings.Cut(elem, ";")
		k, val, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if ok && strings.EqualFold(k, "for") {
			return strings.Trim(val, `"`)
		}
	}
	return ""
}

// parseHop reads "1.2.3.4", "1.2.3.4:80", "[2001:db8::1]:80" or "2001:db8::1".
func parseHop(h string) netip.Addr {
	if a, err := netip.ParseAddr(h); err == nil {
		return a.Unmap()
	}
	if ap, err := netip.ParseAddrPort(h); err == nil {
		return ap.Addr().Unmap()
	}
	if a, err := netip.ParseAddr(strings.Trim(h, "[]")); err == nil {
		return a.Unmap()
	}
	return netip.Addr{}
}
