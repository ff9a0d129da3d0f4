package server

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
)

// maxShardWatchInterval bounds how long the circuit breakers (and the
// rate_limit_circuit_state series) of a Redis Cluster lag its slot map: a
// master that died and was replaced keeps its series at most this long.
const maxShardWatchInterval = 5 * time.Second

// shardWatch keeps a Guard's per-master circuit breakers those of the
// Cluster's current masters: every interval it reloads the slot map and
// hands its masters to Guard.SetShards, so that a master that left the map
// (dead and replaced, or turned replica) loses its breaker and series, and
// a promoted one gets a closed breaker at once. Close stops it; Close is
// safe to call once, from any goroutine.
type shardWatch struct {
	stop chan struct{}
	done sync.WaitGroup
}

// watchShards starts a shardWatch of st for g, refreshing every interval.
func watchShards(g *limiter.Guard, st *redisstore.Store, interval time.Duration, logger *slog.Logger) *shardWatch {
	w := &shardWatch{stop: make(chan struct{})}
	refresh := func() {
		ctx, cancel := context.WithTimeout(context.Background(), interval)
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
	w.done.Go(func() {
		refresh()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-t.C:
				refresh()
			}
		}
	})
	return w
}

// Close stops the watch and waits for its refresh to end. It returns nil.
func (w *shardWatch) Close() error {
	close(w.stop)
	w.done.Wait()
	return nil
}
