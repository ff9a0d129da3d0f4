package httplimit

import (
	"log/slog"
	"net/http"
)

// identify resolves the client of r under p. A request whose credentials identify nobody is
// counted (IdentityRecorder) and logged once per interval, never silently keyed by address;
// with RefuseUnusableAPIKey an unusable API key is refused here with 401 invalid_api_key, and
// identify reports false: the request is answered.
func (m *Middleware) identify(w http.ResponseWriter, r *http.Request, p *Policy) (client, bool) {
	c := p.identity.resolve(r)
	if c.fallback == "" {
		return c, true
	}
	ctx := r.Context()
	if ir, ok := m.rep.Recorder.(IdentityRecorder); ok {
		ir.RecordIdentityFallback(ctx, c.fallback)
	}
	refuse := p.identity.cfg.RefuseUnusableAPIKey && c.fallback != FallbackInvalidJWT
	// The reason alone: the credential is a secret, and its hash would name a client it is not.
	m.identityLog.Log(ctx, "request credentials identify no client", []slog.Attr{
		slog.String("reason", c.fallback), slog.Bool("refused", refuse), slog.String("keyed_by", c.key)})
	if !refuse {
		return c, true
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
	writeJSON(w, "application/json", http.StatusUnauthorized, RejectedBody{Error: "invalid_api_key",
		Message: "the API key is not one this service knows (" + c.fallback + ")"})
	return client{}, false
}
