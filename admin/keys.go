package admin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	"github.com/rl-exporter/rl-exporter/httplimit"
)

// KeysPath is where a client's budgets are forgotten: DELETE
// KeysPath/{key}.
const KeysPath = "/admin/v1/keys"

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
