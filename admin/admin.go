// Package admin is the admin API of rl-exporter serve: it shows the limits
// in force and changes them live, without a deploy, through the live-limit
// hashes of package livelimits.
//
//	GET    /admin/v1/limits                  every limit in force and every live change
//	GET    /admin/v1/limits/{tier}           the tier's live change and limits
//	PUT    /admin/v1/limits/{tier}           replace the tier's live change (JSON body)
//	PATCH  /admin/v1/limits/{tier}           change some fields (raise a rollout, ...)
//	PUT or PATCH ...?dry_run=true            show what the change would do, change nothing
//	DELETE /admin/v1/limits/{tier}           remove it: the configured limits apply again
//	... and the same under /admin/v1/limits/{class}/{tier}
//	DELETE /admin/v1/keys/{key}[?class=c]    forget a client's budgets (every class, or c)
//
// Every request needs a bearer token (compared in constant time); a
// read-only token may only GET. Every change is logged as an audit line
// naming the token (never the token itself), the key, and the old and new
// values. The package is served only on the admin listener.
//
// The same tokens guard the rest of the admin listener (Guard): the
// top-limited keys and the profiles of ProfilingHandlers. Requests
// refused for their token are counted and logged in summary
// (AuthFailures). A Guard of its own tokens also stands in front of the
// decision API when that has tokens.
package admin

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"net/url"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rl-exporter/rl-exporter/httplimit"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/livelimits"
)

// Path is the root of the admin API.
const Path = "/admin/v1/limits"

// KeysPath is where a client's budgets are forgotten: DELETE
// KeysPath/{key}.
const KeysPath = "/admin/v1/keys"

// UsagePath is where the admin listener answers GET UsagePath?key=K with
// the client's usage (httplimit.Middleware.UsageHandler) for any token,
// read-only included: any key, whoever its peer.
const UsagePath = "/admin/v1/usage"

// maxClientKey bounds the key of DELETE KeysPath/{key}, as the decision
// API bounds its keys.
const maxClientKey = 512

// KeyResetter forgets a client's rate-limit budgets;
// httplimit.Middleware implements it. Implementations are safe for
// concurrent use.
type KeyResetter interface {
	// ResetClient forgets client's budgets under every class, or only
	// class when not empty (an unknown one is an error wrapping
	// httplimit.ErrUnknownClass), and returns what it forgot.
	ResetClient(ctx context.Context, client, class string) ([]httplimit.ResetState, error)
}

// maxBody bounds a request body.
const maxBody = 16 << 10

// Token is one bearer token. It is a plain value.
type Token struct {
	// Name identifies the token in audit lines.
	Name string
	// ReadWrite may change limits; otherwise the token is read-only.
	ReadWrite bool
	// Secret is the token itself.
	Secret string
}

// Config configures an API. Tokens and Cache are required.
type Config struct {
	// Tokens are the bearer tokens, unless Guard is set.
	Tokens []Token
	// Guard, when set, checks the tokens instead of one made of Tokens:
	// the Guard of the rest of the admin listener, so that one
	// Guard.SetTokens changes them everywhere.
	Guard *Guard
	// Cache is the live-limit cache of this instance: what it knows, where
	// it writes.
	Cache *livelimits.Cache
	// Logger receives the audit lines (info) and errors. Default: discard.
	Logger *slog.Logger
	// Now is the clock of expiries; default time.Now.
	Now func() time.Time
	// Keys, when set, serves DELETE KeysPath/{key}: it forgets the
	// client's budgets. Nil: not served.
	Keys KeyResetter
	// Failures, when set, is told of every request refused for its token.
	Failures *AuthFailures
}

// ErrNoTokens is returned by New when no token is configured: the admin
// API must then not be served at all.
var ErrNoTokens = errors.New("admin: no token configured")

// API serves the admin API. It is safe for concurrent use.
type API struct {
	cfg   Config
	guard *Guard
}

// New returns the API, or ErrNoTokens.
func New(cfg Config) (*API, error) {
	if len(cfg.Tokens) == 0 && cfg.Guard == nil {
		return nil, ErrNoTokens
	}
	if cfg.Cache == nil {
		return nil, errors.New("admin: Cache is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	g := cfg.Guard
	if g == nil {
		var err error
		if g, err = NewGuardWith(GuardConfig{Tokens: cfg.Tokens, Failures: cfg.Failures}); err != nil {
			return nil, err
		}
	}
	return &API{cfg: cfg, guard: g}, nil
}

// Guard checks the bearer tokens of requests to the admin listener. It is
// safe for concurrent use: SetTokens swaps the whole set at once, and a
// request is checked against one set, the old or the new.
type Guard struct {
	set      atomic.Pointer[tokenSet]
	realm    string
	failures *AuthFailures
}

// tokenSet is the tokens a Guard accepts and their hashes, by index; never
// changed once made.
type tokenSet struct {
	tokens []Token
	hashes [][sha256.Size]byte
}

// DefaultRealm is the realm of the admin listener's Bearer challenge.
const DefaultRealm = "rl-exporter admin"

// GuardConfig configures a Guard. Tokens are required.
type GuardConfig struct {
	Tokens []Token
	// Realm names what the token opens in the WWW-Authenticate challenge.
	// Default DefaultRealm.
	Realm string
	// Failures, when set, is told of every request refused for a missing
	// or wrong token.
	Failures *AuthFailures
}

// NewGuard returns a Guard accepting tokens, or ErrNoTokens.
func NewGuard(tokens []Token) (*Guard, error) {
	return NewGuardWith(GuardConfig{Tokens: tokens})
}

// NewGuardWith returns the Guard cfg describes, or ErrNoTokens.
func NewGuardWith(cfg GuardConfig) (*Guard, error) {
	if len(cfg.Tokens) == 0 {
		return nil, ErrNoTokens
	}
	if cfg.Realm == "" {
		cfg.Realm = DefaultRealm
	}
	g := &Guard{realm: cfg.Realm, failures: cfg.Failures}
	if err := g.SetTokens(cfg.Tokens); err != nil {
		return nil, err
	}
	return g, nil
}

// SetTokens replaces the tokens the Guard accepts (a reload of the tokens
// file): a token left out is refused from the next request on. None
// refuses every request. On error the tokens in force stay.
func (g *Guard) SetTokens(tokens []Token) error {
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
func (g *Guard) ReadOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g.admit(w, r) == nil {
			return
		}
		h.ServeHTTP(w, r)
	})
}

// admit returns the token of r, or nil after answering 401 (and telling
// Failures).
func (g *Guard) admit(w http.ResponseWriter, r *http.Request) *Token {
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

// DefaultFailureInterval is the least time between two log lines of
// refused tokens.
const DefaultFailureInterval = 10 * time.Second

// AuthFailures counts the requests a Guard refused for a missing or wrong
// token and logs them: a WARN line at most once per Interval, with how
// many were refused since the line before and the last peer, so that a
// guessing client can neither go unseen nor flood the log. Set its fields
// before first use; it is then safe for concurrent use.
type AuthFailures struct {
	// Logger receives the lines. Default: discard.
	Logger *slog.Logger
	// Interval is the least time between two lines. Default
	// DefaultFailureInterval.
	Interval time.Duration
	// Now is the clock of Interval; default time.Now.
	Now func() time.Time

	mu      sync.Mutex
	total   uint64
	pending uint64 // refused since the last line
	last    time.Time
}

// Total returns how many requests were refused since start.
func (f *AuthFailures) Total() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.total
}

func (f *AuthFailures) add(r *http.Request, presented bool) {
	now := time.Now
	if f.Now != nil {
		now = f.Now
	}
	interval := cmp.Or(f.Interval, DefaultFailureInterval)
	t := now()
	f.mu.Lock()
	f.total++
	f.pending++
	if !f.last.IsZero() && t.Sub(f.last) < interval {
		f.mu.Unlock()
		return
	}
	n := f.pending
	f.last, f.pending = t, 0
	f.mu.Unlock()
	if f.Logger == nil {
		return
	}
	reason := "no bearer token"
	if presented {
		reason = "a wrong bearer token"
	}
	f.Logger.LogAttrs(r.Context(), slog.LevelWarn, "admin: requests refused for their token",
		slog.Uint64("refused", n),
		slog.String("last_peer", r.RemoteAddr), slog.String("last_path", r.URL.Path), slog.String("last_reason", reason))
}

// NeedsTokens answers every request 403 with a message saying to configure
// admin tokens. It stands for what the admin listener serves only behind a
// Guard (the top-limited keys name clients and their addresses) when no
// token is configured, so that such a listener shows nothing and says why.
func NeedsTokens() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fail(w, http.StatusForbidden, "admin_tokens_required",
			"%s is served only with admin tokens: set admin.tokens_file or admin.tokens (RL_ADMIN__TOKENS)", r.URL.Path)
	})
}

// ProfilingHandlers returns net/http/pprof's handlers by ServeMux pattern
// under /debug/pprof/, for the admin listener, to be put behind a Guard.
// They are registered here explicitly; the DefaultServeMux that importing
// net/http/pprof fills is never served. The command line
// (/debug/pprof/cmdline) is left out: it may carry a Redis URL with its
// password.
func ProfilingHandlers() map[string]http.Handler {
	return map[string]http.Handler{
		"/debug/pprof/":        http.HandlerFunc(pprof.Index),
		"/debug/pprof/profile": http.HandlerFunc(pprof.Profile),
		"/debug/pprof/symbol":  http.HandlerFunc(pprof.Symbol),
		"/debug/pprof/trace":   http.HandlerFunc(pprof.Trace),
	}
}

// Handlers returns the handlers by ServeMux pattern, for the admin listener.
func (a *API) Handlers() map[string]http.Handler {
	h := http.HandlerFunc(a.serve)
	out := map[string]http.Handler{Path: h, Path + "/": h}
	if a.cfg.Keys != nil {
		k := http.HandlerFunc(a.serveKeys)
		out[KeysPath] = k
		out[KeysPath+"/"] = k
	}
	return out
}

// KeysReset is the body of a successful DELETE KeysPath/{key}.
type KeysReset struct {
	// Key is the client key whose budgets were forgotten.
	Key string `json:"key"`
	// Class is the class asked for; empty: every class.
	Class string `json:"class,omitempty"`
	// Reset lists every budget forgotten: class, plan tier, endpoint
	// ("*" for a class's shared budget), algorithm and the live change
	// it belonged to, if any. A budget the client never used is listed
	// too: forgetting it is harmless.
	Reset []httplimit.ResetState `json:"reset"`
	// Note says in words what happened.
	Note string `json:"note"`
}

// serveKeys answers DELETE KeysPath/{key}[?class=c]: the client's budgets
// are forgotten on the store (every instance sees it at once) and the
// change is audited like a change of limits.
func (a *API) serveKeys(w http.ResponseWriter, r *http.Request) {
	tok := a.guard.admit(w, r)
	if tok == nil {
		return
	}
	if r.Method != http.MethodDelete {
		w.Header().Set("Allow", http.MethodDelete)
		fail(w, http.StatusMethodNotAllowed, "method_not_allowed", "use DELETE %s/{key} to forget a client's budgets", KeysPath)
		return
	}
	if !tok.ReadWrite {
		fail(w, http.StatusForbidden, "forbidden", "token %q is read-only", tok.Name)
		return
	}
	raw := strings.TrimPrefix(strings.TrimPrefix(r.URL.EscapedPath(), KeysPath), "/")
	key, err := url.PathUnescape(raw)
	switch {
	case err != nil:
		fail(w, http.StatusBadRequest, "bad_request", "key: %q is not a valid escaped path segment: %v", raw, err)
		return
	case key == "":
		fail(w, http.StatusBadRequest, "bad_request", "want DELETE %s/{key} with the client's key as the limiter names it (user:42, ip:10.0.0.1, apikey:<hash>; escape '/' as %%2F)", KeysPath)
		return
	case len(key) > maxClientKey:
		fail(w, http.StatusBadRequest, "bad_request", "key: longer than %d bytes", maxClientKey)
		return
	}
	q := r.URL.Query()
	for name := range q {
		if name != "class" {
			fail(w, http.StatusBadRequest, "bad_request", "unknown query parameter %q (only class is accepted)", name)
			return
		}
	}
	class := q.Get("class")
	if _, given := q["class"]; given && class == "" {
		fail(w, http.StatusBadRequest, "bad_request", "class: empty; leave it out to reset every class")
		return
	}
	states, err := a.cfg.Keys.ResetClient(r.Context(), key, class)
	if errors.Is(err, httplimit.ErrUnknownClass) {
		fail(w, http.StatusBadRequest, "bad_request", "class: %v", err)
		return
	}
	if states == nil {
		states = []httplimit.ResetState{}
	}
	a.cfg.Logger.LogAttrs(r.Context(), slog.LevelInfo, "admin audit: rate-limit key reset",
		slog.String("token", tok.Name), slog.String("action", "reset_key"), slog.String("key", key),
		slog.String("class", class), slog.Int("budgets", len(states)), slog.Bool("complete", err == nil),
		slog.String("remote", r.RemoteAddr))
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, struct {
			errorBody
			KeysReset
		}{errorBody{Error: "store_unavailable", Message: err.Error()},
			KeysReset{Key: key, Class: class, Reset: states, Note: "the store failed: only the budgets listed in reset were forgotten"}})
		return
	}
	where := "every class"
	if class != "" {
		where = "class " + class
	}
	writeJSON(w, http.StatusOK, KeysReset{Key: key, Class: class, Reset: states,
		Note: fmt.Sprintf("%d budgets of %s under %s forgotten: its next requests find full quotas", len(states), key, where)})
}

// authenticate returns the token of the request, or nil. Every configured
// token is compared, in constant time, whatever matches.
func (g *Guard) authenticate(r *http.Request) (tok *Token, presented bool) {
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

type errorBody struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func fail(w http.ResponseWriter, code int, kind, format string, args ...any) {
	writeJSON(w, code, errorBody{Error: kind, Message: fmt.Sprintf(format, args...)})
}

func (a *API) serve(w http.ResponseWriter, r *http.Request) {
	tok := a.guard.admit(w, r)
	if tok == nil {
		return
	}
	write := r.Method != http.MethodGet && r.Method != http.MethodHead
	if write && !tok.ReadWrite {
		fail(w, http.StatusForbidden, "forbidden", "token %q is read-only", tok.Name)
		return
	}
	rest := strings.Trim(strings.TrimPrefix(r.URL.Path, Path), "/")
	if rest == "" {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET")
			fail(w, http.StatusMethodNotAllowed, "method_not_allowed", "only GET on %s", Path)
			return
		}
		writeJSON(w, http.StatusOK, a.list("", ""))
		return
	}
	parts := strings.Split(rest, "/")
	var class, tier string
	switch len(parts) {
	case 1:
		tier = parts[0]
	case 2:
		class, tier = parts[0], parts[1]
	default:
		fail(w, http.StatusNotFound, "not_found", "want %s/{tier} or %s/{class}/{tier}", Path, Path)
		return
	}
	key := a.key(class, tier)
	if !a.known(key) {
		if class != "" {
			fail(w, http.StatusNotFound, "not_found", "no class %q with tier %q in the configuration", class, tier)
		} else {
			fail(w, http.StatusNotFound, "not_found", "no tier %q in the configuration", tier)
		}
		return
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		writeJSON(w, http.StatusOK, a.list(class, tier))
	case http.MethodPut, http.MethodPatch:
		a.change(w, r, tok, key, class, tier, r.Method == http.MethodPatch)
	case http.MethodDelete:
		a.remove(w, r, tok, key, class, tier)
	default:
		w.Header().Set("Allow", "GET, PUT, PATCH, DELETE")
		fail(w, http.StatusMethodNotAllowed, "method_not_allowed", "use GET, PUT, PATCH or DELETE")
	}
}

func (a *API) key(class, tier string) string {
	if class == "" {
		return livelimits.TierKey(a.cfg.Cache.Prefix(), tier)
	}
	return livelimits.ClassKey(a.cfg.Cache.Prefix(), class, tier)
}

func (a *API) known(key string) bool {
	for _, k := range a.cfg.Cache.Keys() {
		if k == key {
			return true
		}
	}
	return false
}

// ChangeRequest is the body of PUT and PATCH. Every field is optional; PUT
// replaces the whole change, PATCH only the fields given.
type ChangeRequest struct {
	// MaxRequests is the limit's rate, Window its period (a Go duration);
	// Rate sets both at once as "<requests>/<duration>".
	MaxRequests *int64  `json:"max_requests"`
	Window      *string `json:"window"`
	Rate        *string `json:"rate"`
	// Burst is the bucket size of the bucket algorithms.
	Burst *int64 `json:"burst"`
	// Algorithm replaces the configured algorithm.
	Algorithm *string `json:"algorithm"`
	// Shadow runs the change as a dark launch: counted, never enforced.
	Shadow *bool `json:"shadow"`
	// RolloutPercent is the share of clients covered, 0 to 100 (default 100).
	RolloutPercent *int `json:"rollout_percent"`
	// ExpiresIn is a Go duration from now; ExpiresAt an RFC 3339 time. At most one.
	ExpiresIn *string `json:"expires_in"`
	ExpiresAt *string `json:"expires_at"`
}

// changeError is a refused change: the error body's kind and message.
type changeError struct{ kind, msg string }

func badChange(kind, format string, args ...any) *changeError {
	return &changeError{kind: kind, msg: fmt.Sprintf(format, args...)}
}

// change answers PUT (patch false) and PATCH on key: it reads the change
// in force, builds the new one and previews it (dry_run=true) or writes it.
func (a *API) change(w http.ResponseWriter, r *http.Request, tok *Token, key, class, tier string, patch bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		fail(w, http.StatusRequestEntityTooLarge, "bad_request", "body over %d bytes", maxBody)
		return
	}
	var req ChangeRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		fail(w, http.StatusBadRequest, "bad_request", "body is not a JSON limit change: %v", err)
		return
	}
	ctx := r.Context()
	current, err := a.cfg.Cache.Backend().Read(ctx, []string{key})
	if err != nil {
		fail(w, http.StatusServiceUnavailable, "store_unavailable", "%v", err)
		return
	}
	old := current[key]
	if patch && len(old) == 0 {
		fail(w, http.StatusNotFound, "not_found", "no live change at %s to patch; PUT one", key)
		return
	}
	now := a.cfg.Now()
	ch, cerr := a.newChange(key, old, req, patch, now)
	if cerr != nil {
		fail(w, http.StatusBadRequest, cerr.kind, "%s", cerr.msg)
		return
	}
	ch.UpdatedBy, ch.UpdatedAt = tok.Name, now
	var replaced *ChangeJSON
	if !patch && len(old) > 0 {
		replaced = storedChange(key, class, tier, old)
	}
	if r.URL.Query().Get("dry_run") == "true" {
		out := a.listWith(a.cfg.Cache.Preview(key, ch), class, tier)
		out.DryRun, out.Replaced = true, replaced
		out.Note = fmt.Sprintf("dry run: nothing changed; the limits above are what %s would enforce", key)
		writeJSON(w, http.StatusOK, out)
		return
	}
	if err := a.cfg.Cache.Backend().Write(ctx, key, ch.Fields(), ch.ExpiresAt); err != nil && !strings.Contains(err.Error(), "stored;") {
		fail(w, http.StatusServiceUnavailable, "store_unavailable", "%v", err)
		return
	}
	if err := a.cfg.Cache.Refresh(ctx, key); err != nil {
		a.cfg.Logger.Warn("admin: re-read after a change failed", slog.String("key", key), slog.String("error", err.Error()))
	}
	action := "put"
	if patch {
		action = "patch"
	}
	a.audit(r, tok, action, key, old, ch.Fields())
	out := a.list(class, tier)
	if replaced != nil {
		out.Replaced = replaced
		out.Note = fmt.Sprintf("PUT replaced the whole live change at %s (shown in replaced); PATCH changes some fields and keeps the others", key)
	}
	writeJSON(w, http.StatusOK, out)
}

// newChange is the change req makes at key: on top of old for a PATCH,
// from nothing for a PUT. It is checked against the key's target and must
// not have expired by now.
func (a *API) newChange(key string, old map[string]string, req ChangeRequest, patch bool, now time.Time) (livelimits.Change, *changeError) {
	fields := map[string]string{}
	if patch {
		for k, v := range old {
			fields[k] = v
		}
	}
	if cerr := setChangeFields(fields, req, now); cerr != nil {
		return livelimits.Change{}, cerr
	}
	delete(fields, livelimits.FieldUpdatedBy)
	delete(fields, livelimits.FieldUpdatedAt)
	ch, err := livelimits.ParseFields(fields)
	if err == nil {
		err = a.cfg.Cache.Check(key, ch)
	}
	if err != nil {
		return ch, badChange("invalid_limit", "%s: %v", key, err)
	}
	if ch.Expired(now) {
		return ch, badChange("invalid_limit", "%s: expires_at: %s is not in the future", key, ch.ExpiresAt.Format(time.RFC3339))
	}
	return ch, nil
}

// setChangeFields writes the fields req gives into fields, dropping those
// a new rate or a new max_requests and window replace.
func setChangeFields(fields map[string]string, req ChangeRequest, now time.Time) *changeError {
	set := func(f string, v *string) {
		if v != nil {
			fields[f] = *v
		}
	}
	num := func(n *int64) *string {
		if n == nil {
			return nil
		}
		s := fmt.Sprint(*n)
		return &s
	}
	if req.Rate != nil {
		delete(fields, livelimits.FieldMaxRequests)
		delete(fields, livelimits.FieldWindow)
	}
	if req.MaxRequests != nil || req.Window != nil {
		delete(fields, livelimits.FieldRate)
	}
	set(livelimits.FieldMaxRequests, num(req.MaxRequests))
	set(livelimits.FieldWindow, req.Window)
	set(livelimits.FieldRate, req.Rate)
	set(livelimits.FieldBurst, num(req.Burst))
	set(livelimits.FieldAlgorithm, req.Algorithm)
	if req.Shadow != nil {
		fields[livelimits.FieldShadow] = fmt.Sprint(*req.Shadow)
	}
	if req.RolloutPercent != nil {
		fields[livelimits.FieldRolloutPercent] = fmt.Sprint(*req.RolloutPercent)
	}
	switch {
	case req.ExpiresIn != nil && req.ExpiresAt != nil:
		return badChange("bad_request", "expires_in and expires_at: set one, not both")
	case req.ExpiresIn != nil:
		d, err := time.ParseDuration(*req.ExpiresIn)
		if err != nil || d <= 0 {
			return badChange("bad_request", "expires_in: %q is not a positive Go duration (such as 30m, 2h)", *req.ExpiresIn)
		}
		fields[livelimits.FieldExpiresAt] = now.Add(d).UTC().Format(time.RFC3339Nano)
	case req.ExpiresAt != nil:
		fields[livelimits.FieldExpiresAt] = *req.ExpiresAt
	}
	return nil
}

func (a *API) remove(w http.ResponseWriter, r *http.Request, tok *Token, key, class, tier string) {
	ctx := r.Context()
	current, err := a.cfg.Cache.Backend().Read(ctx, []string{key})
	if err != nil {
		fail(w, http.StatusServiceUnavailable, "store_unavailable", "%v", err)
		return
	}
	if len(current[key]) == 0 {
		fail(w, http.StatusNotFound, "not_found", "no live change at %s", key)
		return
	}
	if err := a.cfg.Cache.Backend().Delete(ctx, key); err != nil && !strings.Contains(err.Error(), "stored;") {
		fail(w, http.StatusServiceUnavailable, "store_unavailable", "%v", err)
		return
	}
	if err := a.cfg.Cache.Refresh(ctx, key); err != nil {
		a.cfg.Logger.Warn("admin: re-read after a change failed", slog.String("key", key), slog.String("error", err.Error()))
	}
	a.audit(r, tok, "delete", key, current[key], nil)
	writeJSON(w, http.StatusOK, a.list(class, tier))
}

// audit logs one change: who (the token's name), what, old → new.
func (a *API) audit(r *http.Request, tok *Token, action, key string, old, new map[string]string) {
	show := func(m map[string]string) string {
		if len(m) == 0 {
			return "(configured limit)"
		}
		var parts []string
		for k, v := range m {
			if k == livelimits.FieldUpdatedAt || k == livelimits.FieldUpdatedBy {
				continue
			}
			parts = append(parts, k+"="+v)
		}
		sort.Strings(parts)
		return strings.Join(parts, " ")
	}
	a.cfg.Logger.LogAttrs(r.Context(), slog.LevelInfo, "admin audit: live limit changed",
		slog.String("token", tok.Name), slog.String("action", action), slog.String("key", key),
		slog.String("old", show(old)), slog.String("new", show(new)), slog.String("remote", r.RemoteAddr))
}

// LimitJSON is a limit as the admin API shows it.
type LimitJSON struct {
	Algorithm   limiter.Algorithm `json:"algorithm"`
	MaxRequests int64             `json:"max_requests"`
	Window      string            `json:"window"`
	Burst       int64             `json:"burst,omitempty"`
}

func limitJSON(l limiter.Limit) LimitJSON {
	return LimitJSON{Algorithm: l.Algorithm, MaxRequests: l.Rate, Window: l.Period.String(), Burst: l.Burst}
}

// InForce is the limit one class × tier enforces.
type InForce struct {
	Class string `json:"class"`
	Tier  string `json:"tier"`
	// Effective is the limit enforced, in words: "2 per 1h0m0s
	// (fixed_window)", so a tier-wide max_requests shows the window each
	// class keeps.
	Effective  string    `json:"effective"`
	Configured LimitJSON `json:"configured"`
	// Live is the live change's limit, when one applies.
	Live *LimitJSON `json:"live,omitempty"`
	// Source is "file" or the key of the live change.
	Source         string     `json:"source"`
	RolloutPercent int        `json:"rollout_percent"`
	Shadow         bool       `json:"shadow"`
	ExpiresAt      *time.Time `json:"expires_at,omitempty"`
}

// ChangeJSON is one live change as stored.
type ChangeJSON struct {
	Key            string     `json:"key"`
	Class          string     `json:"class,omitempty"`
	Tier           string     `json:"tier"`
	MaxRequests    int64      `json:"max_requests,omitempty"`
	Window         string     `json:"window,omitempty"`
	Burst          int64      `json:"burst,omitempty"`
	Algorithm      string     `json:"algorithm,omitempty"`
	Shadow         bool       `json:"shadow"`
	RolloutPercent int        `json:"rollout_percent"`
	ExpiresAt      *time.Time `json:"expires_at,omitempty"`
	UpdatedBy      string     `json:"updated_by,omitempty"`
	UpdatedAt      *time.Time `json:"updated_at,omitempty"`
	// Error says why the hash's current content is ignored (the values
	// above are then the last good ones, if any).
	Error string `json:"error,omitempty"`
}

// List is the body of every successful answer.
type List struct {
	Limits  []InForce    `json:"limits"`
	Changes []ChangeJSON `json:"changes"`
	// DryRun is true when the answer shows a change that was not made.
	DryRun bool `json:"dry_run,omitempty"`
	// Replaced is the live change a PUT replaced (or would replace).
	Replaced *ChangeJSON `json:"replaced,omitempty"`
	// Note says in words what happened.
	Note string `json:"note,omitempty"`
}

// effective writes a limit as Effective shows it.
func effective(l limiter.Limit) string {
	s := fmt.Sprintf("%d per %s (%s)", l.Rate, l.Period, l.Algorithm)
	if l.Algorithm.IsBucket() && l.Burst > 0 {
		s += fmt.Sprintf(", burst %d", l.Burst)
	}
	return s
}

// storedChange shows the fields of a hash as stored, or its error.
func storedChange(key, class, tier string, fields map[string]string) *ChangeJSON {
	c := &ChangeJSON{Key: key, Class: class, Tier: tier}
	ch, err := livelimits.ParseFields(fields)
	if err != nil {
		c.Error = err.Error()
		return c
	}
	fillChange(c, ch)
	return c
}

func fillChange(c *ChangeJSON, ch livelimits.Change) {
	c.MaxRequests, c.Burst, c.Algorithm, c.Shadow, c.RolloutPercent = ch.MaxRequests, ch.Burst, string(ch.Algorithm), ch.Shadow, ch.RolloutPercent
	if ch.Window > 0 {
		c.Window = ch.Window.String()
	}
	c.ExpiresAt, c.UpdatedBy, c.UpdatedAt = timePtr(ch.ExpiresAt), ch.UpdatedBy, timePtr(ch.UpdatedAt)
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// list shows the limits in force and the changes, narrowed to a tier or a
// class and tier when given.
func (a *API) list(class, tier string) List {
	return a.listWith(a.cfg.Cache.Overlay(), class, tier)
}

// listWith is list with the limits of the overlay ov.
func (a *API) listWith(ov livelimits.Overlay, class, tier string) List {
	out := List{Limits: []InForce{}, Changes: []ChangeJSON{}}
	for _, t := range a.cfg.Cache.Targets() {
		if (tier != "" && t.Tier != tier) || (class != "" && t.Class != class) {
			continue
		}
		in := InForce{Class: t.Class, Tier: t.Tier, Configured: limitJSON(t.Limit), Source: "file", RolloutPercent: 100, Effective: effective(t.Limit)}
		if ap, ok := ov[t.Class][t.Tier]; ok {
			l := limitJSON(ap.Limit)
			in.Effective = effective(ap.Limit)
			if ap.RolloutPercent < 100 {
				in.Effective += fmt.Sprintf("; for %d%% of clients", ap.RolloutPercent)
			}
			if ap.Shadow {
				in.Effective += "; shadow: counted, not enforced"
			}
			in.Live, in.Source, in.RolloutPercent, in.Shadow, in.ExpiresAt = &l, ap.Source, ap.RolloutPercent, ap.Shadow, timePtr(ap.ExpiresAt)
		}
		out.Limits = append(out.Limits, in)
	}
	sort.Slice(out.Limits, func(i, j int) bool {
		if out.Limits[i].Class != out.Limits[j].Class {
			return out.Limits[i].Class < out.Limits[j].Class
		}
		return out.Limits[i].Tier < out.Limits[j].Tier
	})
	for _, e := range a.cfg.Cache.Entries() {
		if (tier != "" && e.Tier != tier) || (class != "" && e.Class != class) || (tier != "" && class == "" && e.Class != "") {
			continue
		}
		c := ChangeJSON{Key: e.Key, Class: e.Class, Tier: e.Tier, Error: e.Error}
		if ch := e.Change; ch != nil {
			fillChange(&c, *ch)
		}
		out.Changes = append(out.Changes, c)
	}
	return out
}
