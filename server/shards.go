package server

import (
	"context"
	"log/slog"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
)

// maxShardWatchInterval bounds how long the circuit breakers (and the
// rate_limit_circuit_state series) of a Redis Cluster lag its slot map: a
// master that died and was replaced keeps its series at most this long.
const maxShardWatchInterval = 5 * time.Second

// watchShards keeps g's per-master circuit breakers those of the Cluster's
// current masters until ctx is done: every interval it reloads the slot
// map and hands its masters to Guard.SetShards, so that a master that left
// the map (dead and replaced, or turned replica) loses its breaker and
// series, and a promoted one gets a closed breaker at once.
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
