package httplimit

import "net/http"

// ReleaseHandler returns the release of a lease the decision API or forward-auth gave: POST a
// ReleaseRequest as JSON, or no body and the lease in LeaseHeader (a gateway's release after the
// response), and get a ReleaseResponse. Any other method is 405. Like CheckHandler it believes
// the lease it is given: mount it where CheckHandler is (DecisionAPI lists it at ReleasePath).
// Safe for concurrent use.
func (m *Middleware) ReleaseHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			methodNotAllowed(w)
			return
		}
		m.serveRelease(w, r)
	})
}
