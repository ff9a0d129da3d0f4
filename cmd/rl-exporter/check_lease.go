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
	scope := storeScope(cfg, "leases")
	for _, class := range cfg.ClassNames() {
		for _, tier := range cfg.Tiers.Names {
			limits, _ := cfg.NamedLimits(class, tier)
			for _, l := range limits {
				if !l.IsConcurrency() {
					continue
				}
				lease := l.Lease()
				fmt.Fprintf(w, "  %s: concurrency, at most %d requests in flight per key, %s; a lease never given back (a crashed instance) frees its slot after lease_ttl %s\n",
					limitName(cfg, class, tier, l), lease.Limit, scope, lease.TTL)
			}
		}
	}
}

// storeScope says whether what the store holds of a limit (its leases, its
// penalty box) is the fleet's or each instance's.
func storeScope(cfg *config.Config, held string) string {
	if cfg.Store.Type == "redis" {
		return "shared by every instance on this Redis"
	}
	return "per instance: the memory store holds each instance's own " + held
}
