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

// IdentityConfig says who the client of a request is and its plan tier;
// the zero value keys every request by its peer's IP on the default tier.
// Tried in order: a context Identity (WithIdentity), a verified JWT's sub
// (a token failing verification keys by IP), UserHeader, APIKeyHeader (a
// key listed in TierByAPIKey, or any with AllowUnknownAPIKeys), the IP.
// User ids ("user:<id>", TierByKey) and API keys ("apikey:<hash>",
// TierByAPIKey) are separate namespaces. Headers that prove nothing
// (UserHeader, TierHeader, ClientIPHeader) are believed only from the
// peers listed for them; API keys and JWTs count from any peer.
type IdentityConfig struct {
	// TrustedProxies are the peers whose ClientIPHeader is believed.
	TrustedProxies []netip.Prefix
	// ClientIPHeader (default "X-Forwarded-For") is the one header read for
	// the client's address: X-Forwarded-For or Forwarded (RFC 7239; only
	// behind proxies that append to it), walked from the right past
	// trusted hops, or a one-address header the proxy overwrites
	// ("X-Real-IP"; present twice, the peer is used). A value that is no
	// address keys the request by its direct peer, which no header chose.
	ClientIPHeader string
	// TrustedHops > 0 counts the proxies of a list header instead of
	// matching TrustedProxies (Envoy's xff_num_trusted_hops); a shorter
	// list keys by the peer. With 0, when every hop is trusted the
	// leftmost is the client.
	TrustedHops int
	// IPv4Prefix and IPv6Prefix (defaults 32 and 64) are the leading bits
	// that key an address, so that a client cannot rotate addresses within
	// its network for fresh budgets. Zones are dropped.
	IPv4Prefix, IPv6Prefix int
	// TrustedHeaderPeers are the gateways whose UserHeader and TierHeader
	// are believed: a header is safe only from a peer that overwrites it,
	// which a proxy appending X-Forwarded-For need not do, hence a list of
	// its own. Required with UserHeader or TierHeader.
	TrustedHeaderPeers []netip.Prefix
	// UserHeader carries an authenticated user id (X-User-ID).
	UserHeader string
	// APIKeyHeader carries the client's API key (X-API-Key), hashed into keys.
	APIKeyHeader string
	// AllowUnknownAPIKeys makes any API key an identity; by default an
	// unlisted key is keyed by address, so that inventing keys gains nothing.
	AllowUnknownAPIKeys bool
	// JWT, when set, verifies bearer tokens and keys clients by their sub claim.
	JWT *JWTConfig
	// TierHeader carries the plan tier (X-Plan-Tier).
	TierHeader string
	// TierByKey maps user ids and JWT subjects to tiers, TierByAPIKey the
	// known API keys to theirs.
	TierByKey    map[string]string
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

// WithIdentity returns a context carrying id, which wins over every header.
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

// The address grouping's defaults and shortest prefixes: a shorter one
// would make one bucket of many unrelated clients' networks (Shared is the
// way to one budget for everyone).
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

// MaxUserKey is the longest user id kept verbatim in a limiter key; a
// longer one is hashed, so that huge headers make no huge store keys.
const MaxUserKey = 256

// userKey is the client part of a limiter key for the user id u.
func userKey(u string) string {
	if len(u) <= MaxUserKey {
		return "user:" + u
	}
	sum := sha256.Sum256([]byte(u))
	return "user:sha256:" + hex.EncodeToString(sum[:16])
}

// apiKeyKey keys the API key k: hashed, never in clear, under its own prefix.
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

// gatewayHeaders returns r's user and tier headers from a trusted header peer only.
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

// tierOf picks a user's tier: headerTier, TierByKey, then fallback.
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

// clientIP is the peer's address or, from a trusted proxy, the address
// ClientIPHeader gives: never one the client wrote itself.
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

// ipKey keys the address a by its network ("ip:2001:db8:1:2::/64"), or
// bare for a whole-address prefix ("ip:192.0.2.1"). One allocation.
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

// clientKey is a caller-given key (decision API, reset) with an "ip:"
// address grouped as the middleware groups it, so it names the same budget.
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
