package admin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/rl-exporter/rl-exporter/livelimits"
)

// Path is the root of the admin API.
const Path = "/admin/v1/limits"

// Config configures an API. Tokens and Cache are required.
type Config struct {
	// Tokens are the bearer tokens, unless Guard is set.
	Tokens []Token
	// Guard, when set, checks the tokens instead of one made of Tokens:
	// the TokenGuard of the rest of the admin listener, so that one
	// SetTokens changes them everywhere.
	Guard *TokenGuard
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

// API serves the admin API. It is safe for concurrent use.
type API struct {
	cfg   Config
	guard *TokenGuard
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
		if g, err = NewTokenGuardWith(TokenGuardConfig{Tokens: cfg.Tokens, Failures: cfg.Failures}); err != nil {
			return nil, err
		}
	}
	return &API{cfg: cfg, guard: g}, nil
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
		writeJSON(w, http.StatusOK, a.list(target{}))
		return
	}
	parts := strings.Split(rest, "/")
	var at target
	switch len(parts) {
	case 1:
		at.tier = parts[0]
	case 2:
		at.class, at.tier = parts[0], parts[1]
	case 3:
		at.class, at.tier, at.name = parts[0], parts[1], parts[2]
	default:
		fail(w, http.StatusNotFound, "not_found", "want %s/{tier}, %s/{class}/{tier} or %s/{class}/{tier}/{limit}", Path, Path, Path)
		return
	}
	key := a.key(at)
	read := r.Method == http.MethodGet || r.Method == http.MethodHead
	if !a.known(key) && !(read && at.name == "" && len(a.list(at).Limits) > 0) { // a tier of several limits lists them
		switch {
		case at.name != "":
			fail(w, http.StatusNotFound, "not_found", "no limit %q of several in class %q tier %q in the configuration (a concurrency limit has no live change)", at.name, at.class, at.tier)
		case at.class != "":
			fail(w, http.StatusNotFound, "not_found", "no class %q with tier %q under one limit in the configuration (a tier of several limits takes %s/{class}/{tier}/{limit})", at.class, at.tier, Path)
		default:
			fail(w, http.StatusNotFound, "not_found", "no tier %q in the configuration", at.tier)
		}
		return
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		writeJSON(w, http.StatusOK, a.list(at))
	case http.MethodPut, http.MethodPatch:
		a.change(w, r, tok, key, at, r.Method == http.MethodPatch)
	case http.MethodDelete:
		a.remove(w, r, tok, key, at)
	default:
		w.Header().Set("Allow", "GET, PUT, PATCH, DELETE")
		fail(w, http.StatusMethodNotAllowed, "method_not_allowed", "use GET, PUT, PATCH or DELETE")
	}
}

// target is what a request addresses: a tier (every class's), a class's tier, or one of the
// several limits of a class's tier.
type target struct{ class, tier, name string }

func (a *API) key(at target) string {
	switch {
	case at.class == "":
		return livelimits.TierKey(a.cfg.Cache.Prefix(), at.tier)
	case at.name != "":
		return livelimits.LimitKey(a.cfg.Cache.Prefix(), at.class, at.tier, at.name)
	}
	return livelimits.ClassKey(a.cfg.Cache.Prefix(), at.class, at.tier)
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
func (a *API) change(w http.ResponseWriter, r *http.Request, tok *Token, key string, at target, patch bool) {
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
		replaced = storedChange(key, at, old)
	}
	if r.URL.Query().Get("dry_run") == "true" {
		out := a.listWith(a.cfg.Cache.Preview(key, ch), at)
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
	out := a.list(at)
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

func (a *API) remove(w http.ResponseWriter, r *http.Request, tok *Token, key string, at target) {
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
	writeJSON(w, http.StatusOK, a.list(at))
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
