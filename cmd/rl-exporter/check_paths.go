package main

import (
	"fmt"
	"io"

	"github.com/rl-exporter/rl-exporter/config"
	"github.com/rl-exporter/rl-exporter/httplimit"
)

// printPaths writes how a request's path is read before its class is chosen: an API whose ids
// hold encoded slashes needs escaped_slashes decode or keep, for reject refuses them.
func printPaths(w io.Writer, cfg *config.Config) {
	ps := cfg.Server.Paths.HTTPLimit().WithDefaults()
	slashes := map[string]string{
		httplimit.PathsReject: "a path with %2F or %5C is refused: 400 on the proxy, the deny status on /v1/auth",
		httplimit.PathsDecode: "%2F and %5C are decoded to / before matching and forwarding",
		httplimit.PathsKeep:   "%2F and %5C stay within their segment",
	}[ps.EscapedSlashes]
	fmt.Fprintf(w, "paths: escaped_slashes %s (%s), case %s (matching only), trailing_slash %s; dot segments are resolved and repeated slashes merged\n",
		ps.EscapedSlashes, slashes, ps.Case, ps.TrailingSlash)
}
