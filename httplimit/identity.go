package httplimit

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/textproto"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// IdentityConfig says who a request's client is and its plan tier; the zero value keys every
// request by its peer's IP on the default tier. Tried in order: a context Identity
// (WithIdentity), a verified JWT's sub (a token failing verification keys by IP on the default
// tier; a token in an API key header that is no JWT is left to APIKeyHeaders), UserHeader,
// APIKeyHeaders (a key in TierByAPIKey, or any with AllowUnknownAPIKeys), the IP. User ids ("user:<id>") and API keys ("apikey:<hash>") are separate namespaces. Headers a
// client could write itself (UserHeader, TierHeader, ClientIPHeader) are believed only from the
// peers listed for them; API keys and JWTs, secrets the client holds, count from any peer.
type IdentityConfig struct {
	TrustedProxies []netip.Prefix // the peers whose ClientIPHeader is believed
	// ClientIPHeader (default X-Forwarded-For) is the one header read for the client's address:
	// a list, X-Forwarded-For or Forwarded (RFC 7239; only behind proxies that append to it),
	// walked from the right past trusted hops, or a one-address header the proxy overwrites
	// (X-Real-IP; present twice, the peer is used). A value that is no address keys by the peer.
	ClientIPHeader string
	// TrustedHops > 0 skips that many hops of a list header (Envoy's xff_num_trusted_hops)
	// instead of matching them against TrustedProxies, which the peer must still be in; a
	// shorter list keys by the peer. With 0, when every hop is trusted the leftmost is the client.
	TrustedHops int
	// IPv4Prefix and IPv6Prefix (defaults 32 and 64) are the leading bits that key an address, so
	// that a client cannot rotate addresses within its network for fresh budgets; zones are dropped.
	IPv4Prefix, IPv6Prefix int
	// TrustedHeaderPeers, required with UserHeader or TierHeader, are the gateways whose
	// UserHeader and TierHeader are believed: a list apart from TrustedProxies, because such a
	// header is safe only from a peer that overwrites it, which one appending to XFF need not do.
	TrustedHeaderPeers []netip.Prefix
	UserHeader         string // carries an authenticated user id (X-User-ID)
	// APIKeyHeaders carry the client's API key (X-API-Key), hashed into keys: the first present
	// is the key, so that one gateway serves clients of Authorization and of X-Api-Key alike.
	// From Authorization the key is the token after one of APIKeySchemes; a value without a
	// scheme is the key itself.
	APIKeyHeaders []string
	// APIKeySchemes are the Authorization schemes whose token is an API key, any case; default
	// Bearer. Basic's token is base64 user:password and the key the user name, or the password
	// when the user name is empty (curl -u sk_…: sends it so).
	APIKeySchemes []string
	// AllowUnknownAPIKeys makes any API key an identity; by default an unlisted key keys by
	// address, so that inventing keys gains nothing.
	AllowUnknownAPIKeys bool
	// RefuseUnusableAPIKey refuses (401, invalid_api_key) a request whose key header is present
	// but gives no key that identifies a client (Fallback… reasons), instead of keying it by
	// address. Either way an IdentityRecorder counts it.
	RefuseUnusableAPIKey bool
	JWT                  *JWTConfig // when set, verifies bearer tokens and keys clients by their sub
	// TierHeader carries the plan tier (X-Plan-Tier); it wins over TierByKey, TierByAPIKey and
	// Identity.Tier.
	TierHeader string
	// TierByKey maps user ids, JWT subjects and Identity keys to tiers, TierByAPIKey the listed
	// API keys to theirs.
	TierByKey    map[string]string
	TierByAPIKey map[string]string
}

// JWTConfig verifies JSON Web Tokens. A token must carry exp and be signed with Algorithm, the
// only one accepted, so that it cannot choose a weaker one (or none).
type JWTConfig struct {
	Header           string           // carries the token (default Authorization), "Bearer " optional
	Algorithm        string           // HS256, HS384, HS512, RS256, RS384, RS512, ES256, ES384 or ES512
	Secret           []byte           // the HMAC secret of HS* algorithms
	PublicKeyPEM     []byte           // the PEM public key of RS* and ES* algorithms
	Issuer, Audience string           // when set, must match the token's iss and aud
	Leeway           time.Duration    // the clock skew tolerated on exp and nbf
	Now              func() time.Time // the clock; default time.Now
}

// Identity is a client identity verified by the caller. It is a plain value.
type Identity struct {
	Key string // identifies the client (a user or account id); required
	// Tier is the plan tier unless a trusted TierHeader or TierByKey[Key] gives one; unknown or
	// empty: the default tier.
	Tier string
}

type identityKey struct{}

// WithIdentity returns a context carrying id, whose Key wins over every header and token.
func WithIdentity(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// IdentityFrom returns the Identity set by WithIdentity, if any.
func IdentityFrom(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok && id.Key != ""
}

type identity struct {
	cfg               IdentityConfig
	jwt               *jwt.Parser
	jwtKey            any
	jwtHdr            string
	jwtIsKeyHdr       bool              // jwtHdr is one of keyHdrs: a token that is no JWT may be a key
	keyHdrs           []string          // APIKeyHeaders in canonical form
	storedKeyTier     map[string]string // TierByAPIKey by stored key (APIKeyKey), for usage
	schemes           []string          // APIKeySchemes, default Bearer
	ipHdr             string            // ClientIPHeader in canonical form, as r.Header holds it
	ipList, forwarded bool              // ClientIPHeader is X-Forwarded-For or Forwarded; is Forwarded
	v4Bits, v6Bits    int               // the prefix lengths that key an address
}

// The address grouping's defaults and shortest prefixes: a shorter one would make one bucket
// of many unrelated clients' networks.
const (
	DefaultIPv4Prefix = 32
	DefaultIPv6Prefix = 64
	MinIPv4Prefix     = 16
	MinIPv6Prefix     = 32
)

// DefaultClientIPHeader is read for the client's address when ClientIPHeader is empty.
const DefaultClientIPHeader = "X-Forwarded-For"

// ValidHeaderName reports whether s is an HTTP field name (an RFC 9110 token); a pure function.
func ValidHeaderName(s string) bool { return isToken(s) }

// IsListHeader reports whether the client address header h (any case) is a list of hops,
// X-Forwarded-For or Forwarded, rather than one address; a pure function.
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
	if err := id.setAPIKeys(cfg); err != nil {
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
	id.jwtIsKeyHdr = slices.Contains(id.keyHdrs, textproto.CanonicalMIMEHeaderKey(id.jwtHdr))
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

// client is who is asking: the key part naming it, and the tier it claims (the Policy checks it).
// fallback, when set, is why credentials the request carries were not its identity.
type client struct {
	key      string
	tier     string
	fallback string
	claims   map[string]any // a verified JWT's claims, for claim scopes (TierLimit); nil without one
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

// APIKeyKey is the client part of the limiter key of the API key k, its stored form:
// "apikey:" and the first 16 hex digits of k's SHA-256, never k in clear. A pure function.
func APIKeyKey(k string) string {
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
		// A JWT is three dot-separated parts; another token in a header API keys are also
		// read from is left to them (an OpenAI-style key beside JWTs in Authorization).
		if raw, ok := id.bearer(r); ok && (!id.jwtIsKeyHdr || strings.Count(raw, ".") == 2) {
			sub, claims, err := id.verify(raw)
			if err != nil {
				// A token failing verification proves nothing: key by address, default tier.
				return client{key: id.ipKey(id.clientIP(r)), fallback: FallbackInvalidJWT}
			}
			return client{key: userKey(sub), tier: id.tierOf(headerTier, sub, ""), claims: claims}
		}
	}
	if user != "" {
		return client{key: userKey(user), tier: id.tierOf(headerTier, user, "")}
	}
	var fallback string
	if name, v := id.keyHeader(r); name != "" {
		c := id.apiKeyClient(id.keyOf(name, v))
		if c.fallback == "" {
			if headerTier != "" {
				c.tier = headerTier
			}
			return c
		}
		fallback = c.fallback
	}
	return client{key: id.ipKey(id.clientIP(r)), tier: id.tierOf(headerTier, "", ""), fallback: fallback}
}

// Why a request's credentials were not its identity, as an IdentityRecorder counts it: each
// keys the request by its address, or refuses it with RefuseUnusableAPIKey (API keys).
const (
	FallbackUnknownScheme = "unknown_scheme" // Authorization with a scheme not in APIKeySchemes
	FallbackMalformedKey  = "malformed_key"  // no token after the scheme, or Basic not base64 user:password
	FallbackUnknownKey    = "unknown_key"    // a key not in TierByAPIKey, without AllowUnknownAPIKeys
	FallbackInvalidJWT    = "invalid_jwt"    // a JWT failing verification
)

// IdentityRecorder is told of every request keyed by its address although it carried
// credentials. A Config.Recorder implementing it is told; calls come from every request's
// goroutine, so implementations are safe for concurrent use.
type IdentityRecorder interface {
	RecordIdentityFallback(ctx context.Context, reason string)
}

// DefaultAPIKeySchemes are the Authorization schemes read for an API key by default; read
// only, never written.
var DefaultAPIKeySchemes = []string{"Bearer"}

// setAPIKeys checks and compiles the API key settings of cfg.
func (id *identity) setAPIKeys(cfg IdentityConfig) error {
	for _, h := range cfg.APIKeyHeaders {
		if !ValidHeaderName(h) {
			return fmt.Errorf("APIKeyHeaders: %q is not a header name", h)
		}
		id.keyHdrs = append(id.keyHdrs, textproto.CanonicalMIMEHeaderKey(h))
	}
	id.schemes = cfg.APIKeySchemes
	if len(id.schemes) == 0 {
		id.schemes = DefaultAPIKeySchemes
	}
	for _, sc := range id.schemes {
		if !isToken(sc) {
			return fmt.Errorf("APIKeySchemes: %q is not an authentication scheme (an RFC 9110 token)", sc)
		}
	}
	id.storedKeyTier = make(map[string]string, len(cfg.TierByAPIKey))
	for k, tier := range cfg.TierByAPIKey {
		id.storedKeyTier[APIKeyKey(k)] = tier
	}
	return nil
}

// keyHeader is the first of the API key headers r carries, and its value.
func (id *identity) keyHeader(r *http.Request) (name, value string) {
	for _, h := range id.keyHdrs {
		if v := r.Header[h]; len(v) > 0 && v[0] != "" {
			return h, v[0]
		}
	}
	return "", ""
}

// apiKey is the key a credential names: the value of header name, or from Authorization the
// token of one of the schemes. An empty key comes with the reason it is unusable.
type apiKey struct{ raw, unusable string }

// keyOf reads the API key in header name's value v.
func (id *identity) keyOf(name, v string) apiKey {
	if name != "Authorization" {
		return apiKey{raw: v}
	}
	v = strings.TrimSpace(v)
	scheme, token, spaced := strings.Cut(v, " ")
	if !spaced {
		if slices.ContainsFunc(id.schemes, func(sc string) bool { return strings.EqualFold(sc, v) }) {
			return apiKey{unusable: FallbackMalformedKey} // a scheme with no token
		}
		return apiKey{raw: v} // no scheme: the key itself, as clients sent it before schemes
	}
	if !slices.ContainsFunc(id.schemes, func(sc string) bool { return strings.EqualFold(sc, scheme) }) {
		return apiKey{unusable: FallbackUnknownScheme}
	}
	token = strings.TrimSpace(token)
	if strings.EqualFold(scheme, "Basic") {
		token = basicKey(token)
	}
	if token == "" {
		return apiKey{unusable: FallbackMalformedKey}
	}
	return apiKey{raw: token}
}

// basicKey is the key of a Basic credential: the user name, else the password; "" when the
// credential is not base64 user:password.
func basicKey(cred string) string {
	b, err := base64.StdEncoding.DecodeString(cred)
	if err != nil {
		if b, err = base64.RawStdEncoding.DecodeString(cred); err != nil {
			return ""
		}
	}
	user, pass, ok := strings.Cut(string(b), ":")
	switch {
	case !ok:
		return ""
	case user != "":
		return user
	}
	return pass
}

// apiKeyClient is the client an API key identifies: its stored key and the tier TierByAPIKey
// gives it, or, for a key that identifies nobody, the reason (the caller keys by address).
// Every way of naming a client by its key goes through it: requests and usage alike.
func (id *identity) apiKeyClient(k apiKey) client {
	if k.unusable != "" {
		return client{fallback: k.unusable}
	}
	tier, known := id.cfg.TierByAPIKey[k.raw]
	if !known && !id.cfg.AllowUnknownAPIKeys {
		return client{fallback: FallbackUnknownKey}
	}
	return client{key: APIKeyKey(k.raw), tier: tier}
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

// verify checks raw and returns its sub and its claims (the parser's own map, not copied).
func (id *identity) verify(raw string) (string, map[string]any, error) {
	tok, err := id.jwt.Parse(raw, func(*jwt.Token) (any, error) { return id.jwtKey, nil })
	if err != nil {
		return "", nil, err
	}
	sub, err := tok.Claims.GetSubject()
	if err != nil {
		return "", nil, err
	}
	if sub == "" {
		return "", nil, errNoSubject
	}
	claims, _ := tok.Claims.(jwt.MapClaims)
	return sub, claims, nil
}

// inNetworks reports whether a is in one of nets; an invalid address (a Unix socket peer) is in none.
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

// PeerAddr is the IP of a remote address ("host:port", as http.Request.RemoteAddr), IPv4-mapped
// addresses as IPv4; the zero (invalid) Addr when it has none. It is a pure function.
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

// forwardedFor is the unquoted for= parameter of one RFC 7239 Forwarded element, else "".
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
