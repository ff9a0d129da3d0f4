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
// The same tokens guard the rest of the admin listener (TokenGuard): the
// top-limited keys and the profiles of ProfilingHandlers. Requests
// refused for their token are counted and logged in summary
// (AuthFailures). A TokenGuard of its own tokens also stands in front of
// the decision API when that has tokens.
//
// Each file holds one job: guard.go the token guard, failures.go the
// summary of refused tokens, limits.go and list.go the live-limit API,
// keys.go the key reset, pprof.go the profiles; this file what they share.
package admin

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// UsagePath is where the admin listener answers GET UsagePath?key=K with
// the client's usage (httplimit.Middleware.UsageHandler) for any token,
// read-only included: any key, whoever its peer.
const UsagePath = "/admin/v1/usage"

// maxBody bounds a request body.
const maxBody = 16 << 10

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
