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
// (UserHeader, TierHeader, X-Forwarded-For) are believed only from the
// peers listed for them; API keys and verified JWTs are credentials the
// client presents itself and count from any peer.
type IdentityConfig struct {
	// TrustedProxies are the networks whose X-Forwarded-For and Forwarded
	// headers are believed. From any other peer those headers are ignored,
	// so a client cannot choose its own key.
	TrustedProxies []netip.Prefix
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
				return client{key: ipKey(id.clientIP(r))}
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
	return client{key: ipKey(id.clientIP(r)), tier: id.tierOf(headerTier, "", "")}
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

// clientIP is the direct peer's address, or — when the peer is a trusted
// proxy — the rightmost address in Forwarded (or else X-Forwarded-For) that
// is not itself a trusted proxy.
func (id *identity) clientIP(r *http.Request) netip.Addr {
	peer := PeerAddr(r.RemoteAddr)
	if !peer.IsValid() || len(id.cfg.TrustedProxies) == 0 || !inNetworks(peer, id.cfg.TrustedProxies) {
		return peer
	}
	hops := forwardedFor(r.Header.Values("Forwarded"))
	if hops == nil {
		hops = xForwardedFor(r.Header.Values("X-Forwarded-For"))
	}
	last := peer
	for i := len(hops) - 1; i >= 0; i-- {
		a := parseHop(hops[i])
		if !a.IsValid() {
			// A hop we cannot read (obfuscated, "unknown", junk): the
			// trusted proxy that added it is the last thing we know.
			return last
		}
		if !inNetworks(a, id.cfg.TrustedProxies) {
			return a
		}
		last = a
	}
	return last
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

func xForwardedFor(values []string) []string {
	var hops []string
	for _, v := range values {
		for _, h := range strings.Split(v, ",") {
			hops = append(hops, strings.TrimSpace(h))
		}
	}
	return hops
}

// forwardedFor extracts the for= parameters of RFC 7239 Forwarded headers,
// one per element; nil when there are none.
func forwardedFor(values []string) []string {
	var hops []string
	for _, v := range values {
		for _, elem := range strings.Split(v, ",") {
			found := ""
			for _, pair := range strings.Split(elem, ";") {
				k, val, ok := strings.Cut(strings.TrimSpace(pair), "=")
				if ok && strings.EqualFold(k, "for") {
					found = strings.Trim(val, `"`)
				}
			}
			hops = append(hops, found)
		}
	}
	return hops
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
