package main

import (
	"fmt"
	"io"

	"github.com/rl-exporter/rl-exporter/config"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/shares"
)

// printShares writes, for every limit decided from shares, its interval, its largest chunk and
// the overshoot that chunk bounds (docs/redis-store.md).
func printShares(w io.Writer, cfg *config.Config) {
	for _, class := range cfg.ClassNames() {
		sh := cfg.Classes[class].Shares
		if !sh.Enabled {
			continue
		}
		for _, tier := range cfg.Tiers.Names {
			limits, own := cfg.NamedLimits(class, tier)
			if !own {
				continue
			}
			for _, l := range limits {
				lim := l.Limiter()
				chunk := shares.MaxChunk(lim, shares.DefaultMaxFraction)
				bound := fmt.Sprintf("beyond the rule, a span of time admits at most the %d units per key each replica may hold at its start", chunk)
				if lim.Algorithm == limiter.FixedWindow {
					bound = "nothing beyond the rule: a chunk is not used past its window"
				}
				fmt.Fprintf(w, "  %s: shares every %s, chunks of up to %d units per key and replica (a tenth of %d); %s\n",
					limitName(cfg, class, tier, l), sh.Interval, chunk, lim.Quota(), bound)
			}
		}
	}
}
