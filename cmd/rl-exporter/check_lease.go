package main

import (
	"fmt"
	"io"

	"github.com/rl-exporter/rl-exporter/config"
)

// printLeases writes a line per class and tier under algorithm concurrency:
// the limit, the lease_ttl and whether the limit is the fleet's or each
// instance's.
func printLeases(w io.Writer, cfg *config.Config) {
	scope := "shared by every instance on this Redis"
	if cfg.Store.Type != "redis" {
		scope = "per instance: the memory store holds each instance's own leases"
	}
	for _, class := range cfg.ClassNames() {
		for _, tier := range cfg.Tiers.Names {
			l := cfg.TierLimit(class, tier)
			if !l.IsConcurrency() {
				continue
			}
			lease := l.Lease()
			fmt.Fprintf(w, "  %s/%s: concurrency, at most %d requests in flight per key, %s; a lease never given back (a crashed instance) frees its slot after lease_ttl %s\n",
				class, tier, lease.Limit, scope, lease.TTL)
		}
	}
}
