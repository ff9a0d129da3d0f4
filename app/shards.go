package app

import (
	"context"
	"log/slog"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
)

// maxShardWatchInterval bounds how long a Cluster's circuit breakers (and their
// rate_limit_circuit_state series) lag its slot map.
const maxShardWatchInterval = 5 * time.Second

// watchShards hands the Cluster's masters to g.SetShards every interval until ctx
// is done, so that a master that left the slot map (dead, or turned replica) loses
// its breaker and series, and a promoted one gets a closed breaker at once.
func watchShards(ctx context.Context, g *limiter.Guard, st *redisstore.Store, interval time.Duration, logger *slog.Logger) {
	refresh := func() {
		ctx, cancel := context.WithTimeout(ctx, interval)
		defer cancel()
		masters, err := st.Masters(ctx)
		if err != nil {
			logger.Debug("circuit breakers: cluster masters not refreshed", slog.String("error", err.Error()))
			return
		}
		if len(masters) > 0 {
			g.SetShards(masters)
		}
	}
	refresh()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			refresh()
		}
	}
}
