package admin

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
)

// Token is one bearer token. It is a plain value.
type Token struct {
	// Name identifies the token in audit lines.
	Name string
	// ReadWrite may change limits; otherwise the token is read-only.
	ReadWrite bool
	// Secret is the token itself.
	Secret string
}

// ErrNoTokens is returned by New when no token is configured: the admin
// API must then not be served at all.
var ErrNoTokens = errors.New("admin: no token configured")

// TokenGuard puts handlers behind bearer tokens: those of the admin
// listener behind the admin tokens and, with tokens of its own, the
// decision API. It is safe for concurrent use: SetTokens swaps the whole set at once, and a
// request is checked against one set, the old or the new.
type TokenGuard struct {
	set      atomic.Pointer[tokenSet]
	realm    string
	failures *AuthFailures
}

// tokenSet is the tokens a TokenGuard accepts and their hashes, by index; never
// changed once made.
type tokenSet struct {
	tokens []Token
	hashes [][sha256.Size]byte
}

// DefaultRealm is the realm of the admin listener's Bearer challenge.
const DefaultRealm = "rl-exporter admin"

// TokenGuardConfig configures a TokenGuard. Tokens are required.
type TokenGuardConfig struct {
	Tokens []Token
	// Realm names what the token opens in the WWW-Authenticate challenge.
	// Default DefaultRealm.
	Realm string
	// Failures, when set, is told of every request refused for a missing
	// or wrong token.
	Failures *AuthFailures
}

// NewTokenGuard returns a TokenGuard accepting tokens, or ErrNoTokens.
func NewTokenGuard(tokens []Token) (*TokenGuard, error) {
	return NewTokenGuardWith(TokenGuardConfig{Tokens: tokens})
}

// NewTokenGuardWith returns the TokenGuard cfg describes, or ErrNoTokens.
func NewTokenGuardWith(cfg TokenGuardConfig) (*TokenGuard, error) {
	if len(cfg.Tokens) == 0 {
		return nil, ErrNoTokens
	}
	if cfg.Realm == "" {
		cfg.Realm = DefaultRealm
	}
	g := &TokenGuard{realm: cfg.Realm, failures: cfg.Failures}
	if err := g.SetTokens(cfg.Tokens); err != nil {
		return nil, err
	}
	return g, nil
}

// SetTokens replaces the tokens the TokenGuard accepts (a reload of the tokens
// file): a token left out is refused from the next request on. None
// refuses every request. On error the tokens in force stay.
func (g *TokenGuard) SetTokens(tokens []Token) error {
	s := &tokenSet{tokens: append([]Token(nil), tokens...)}
	for _, t := range tokens {
		if t.Secret == "" || t.Name == "" {
			return errors.New("admin: a token without a name or secret")
		}
		s.hashes = append(s.hashes, sha256.Sum256([]byte(t.Secret)))
	}
	g.set.Store(s)
	return nil
}

// ReadOnly returns h behind the token check: any valid token, read-only
// or read-write, passes; without one the answer is 401 with a Bearer
// challenge. It is for what only shows things (the top-limited keys,
// profiles).
func (g *TokenGuard) ReadOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g.admit(w, r) == nil {
			return
		}
		h.ServeHTTP(w, r)
	})
}

// admit returns the token of r, or nil after answering 401 (and telling
// Failures).
func (g *TokenGuard) admit(w http.ResponseWriter, r *http.Request) *Token {
	tok, presented := g.authenticate(r)
	if tok != nil {
		return tok
	}
	if g.failures != nil {
		g.failures.add(r, presented)
	}
	c := `Bearer realm="` + g.realm + `"`
	if presented {
		c += `, error="invalid_token"`
	}
	w.Header().Set("WWW-Authenticate", c)
	fail(w, http.StatusUnauthorized, "unauthorized", "a valid bearer token is required")
	return nil
}

// authenticate returns the token of the request, or nil. Every configured
// token is compared, in constant time, whatever matches.
func (g *TokenGuard) authenticate(r *http.Request) (tok *Token, presented bool) {
	h := r.Header.Get("Authorization")
	scheme, given, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(given) == "" {
		return nil, h != ""
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(given)))
	set := g.set.Load()
	match := -1
	for i, want := range set.hashes {
		if subtle.ConstantTimeCompare(sum[:], want[:]) == 1 {
			match = i
		}
	}
	if match < 0 {
		return nil, true
	}
	return &set.tokens[match], true
}

// NeedsTokens answers every request 403 with a message saying to configure
// admin tokens. It stands for what the admin listener serves only behind a
// TokenGuard (the top-limited keys name clients and their addresses) when no
// token is configured, so that such a listener shows nothing and says why.
func NeedsTokens() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fail(w, http.StatusForbidden, "admin_tokens_required",
			"%s is served only with admin tokens: set admin.tokens_file or admin.tokens (RL_ADMIN__TOKENS)", r.URL.Path)
	})
}

// Guard is the old name of TokenGuard, which guards the decision API too.
//
// Deprecated: use TokenGuard.
type Guard = TokenGuard

// GuardConfig is the old name of TokenGuardConfig.
//
// Deprecated: use TokenGuardConfig.
type GuardConfig = TokenGuardConfig

// NewGuard is the old name of NewTokenGuard.
//
// Deprecated: use NewTokenGuard.
func NewGuard(tokens []Token) (*TokenGuard, error) { return NewTokenGuard(tokens) }

// NewGuardWith is the old name of NewTokenGuardWith.
//
// Deprecated: use NewTokenGuardWith.
func NewGuardWith(cfg TokenGuardConfig) (*TokenGuard, error) { return NewTokenGuardWith(cfg) }
