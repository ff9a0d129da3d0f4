package server

import "net/http"

// WrapHandler wraps the handler net/http calls for listener name ("main",
// "metrics", "admin"), outside every wrapper of serve's own. Call it before Serve.
func (s *Server) WrapHandler(name string, wrap func(http.Handler) http.Handler) {
	s.servers[name].Handler = wrap(s.servers[name].Handler)
}
