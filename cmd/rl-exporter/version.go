package main

import "runtime/debug"

// version and revision are set at link time by the Makefile
// (-X main.version=... -X main.revision=...); otherwise they come from the
// module's build information.
var (
	version  = "dev"
	revision = "unknown"
)

func init() {
	if revision != "unknown" {
		return
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				revision = s.Value
			}
		}
	}
}
