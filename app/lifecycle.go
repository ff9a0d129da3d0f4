package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/oklog/run"
	"github.com/redis/go-redis/v9"

	"github.com/rl-exporter/rl-exporter/config"
	"github.com/rl-exporter/rl-exporter/heartbeat"
	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
)

// part is one long-running piece of a serve process (a listener, a watcher, a
// loop): run calls ready once it does its job and returns once ctx is done and
// it has stopped; an error it returns stops the whole process.
type part struct {
	name string
	run  func(ctx context.Context, ready func()) error
}

// runParts runs parts under one run.Group until ctx is done or a part returns,
// then stops them one at a time in the order given, so the ways in drain before
// what they decide on stops. ready is closed once every part called its ready.
// It returns the first part's error, named after it.
func runParts(ctx context.Context, logger *slog.Logger, ready chan<- struct{}, parts []part) error {
	var g run.Group
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	g.Add(func() error { <-ctx.Done(); return nil }, func(error) { cancel() })
	waiting := atomic.Int64{}
	waiting.Store(int64(len(parts)))
	if len(parts) == 0 {
		close(ready)
	}
	for _, p := range parts {
		pctx, stop := context.WithCancel(context.Background())
		done := make(chan struct{})
		readyOnce := sync.OnceFunc(func() {
			if waiting.Add(-1) == 0 {
				close(ready)
			}
		})
		g.Add(func() error {
			defer close(done)
			err := p.run(pctx, readyOnce)
			logger.Debug("stopped", slog.String("part", p.name))
			if err != nil {
				logger.Error("stopped on error", slog.String("part", p.name), slog.String("error", err.Error()))
				return fmt.Errorf("%s: %w", p.name, err)
			}
			return nil
		}, func(error) {
			stop()
			<-done
		})
	}
	return g.Run()
}

// waitDone is a part's run for a piece that works on its own from start
// (a goroutine of its own) and stops with stop.
func waitDone(stop func() error) func(context.Context, func()) error {
	return func(ctx context.Context, ready func()) error {
		ready()
		<-ctx.Done()
		return stop()
	}
}

var errServedTwice = errors.New("app: Serve called twice")

// Ready is closed once every part of the server serves: the listeners
// accept and the watchers watch. Safe for concurrent use.
func (b *Built) Ready() <-chan struct{} { return b.serving }

// Serve runs every part under one run group until ctx is done or a part fails,
// then stops them in order: the HTTP and gRPC listeners drain, the watchers and
// the live-limit refresh stop, the region shipper ships its last round, the
// heartbeat leaves the instance set, the shard watch stops, and the store closes.
// It returns nil after a clean shutdown, else the first part's error. Call it once.
func (b *Built) Serve(ctx context.Context) error {
	b.mu.Lock()
	if b.running != nil {
		b.mu.Unlock()
		return errServedTwice
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	b.running, b.stopped = cancel, done
	b.mu.Unlock()
	defer close(done)
	defer cancel()
	parts := []part{{name: "http", run: b.Server.Run}}
	if b.grpc != nil {
		parts = append(parts, part{name: "grpc", run: b.grpc.run})
	}
	parts = append(parts, b.reloadParts()...)
	parts = append(parts, b.background...)
	err := runParts(ctx, b.live.logger, b.serving, parts)
	if cerr := b.Server.Shutdown(); err == nil {
		err = cerr
	}
	return err
}

// Shutdown stops a running Serve and waits for it to return; a Built
// never served releases what Build opened, its listeners and clients.
// Calling it again does nothing.
func (b *Built) Shutdown() error {
	b.mu.Lock()
	cancel, stopped := b.running, b.stopped
	b.mu.Unlock()
	if cancel == nil {
		ctx, c := context.WithCancel(context.Background())
		c()
		if err := b.Serve(ctx); !errors.Is(err, errServedTwice) {
			return err
		}
		b.mu.Lock()
		cancel, stopped = b.running, b.stopped
		b.mu.Unlock()
	}
	cancel()
	<-stopped
	return nil
}

// reloadParts are the config file's watch (with Deps.Sources naming a
// file and reload.watch on) and the following of Deps.Reloads.
func (b *Built) reloadParts() []part {
	var out []part
	var asked chan struct{} // the file watch's trigger, when it runs
	if s := b.live.sources; s != nil && s.File != "" && b.live.cfg.Reload.Watch {
		asked = make(chan struct{}, 1)
		// The watch starts from the content serve was built with, so an
		// edit made since is applied rather than taken as the start.
		b.mu.Lock()
		w := config.WatchConfig{Path: s.File, Interval: b.live.cfg.Reload.Interval, Since: b.live.cfg.Digest, Logger: b.live.logger, Trigger: asked}
		b.mu.Unlock()
		out = append(out, part{name: "config watch", run: func(ctx context.Context, ready func()) error {
			ready()
			config.Watch(ctx, w, b.reloadFromSources)
			return nil
		}})
	}
	if b.live.reloads != nil && b.live.sources != nil {
		out = append(out, part{name: "reload requests", run: func(ctx context.Context, ready func()) error {
			ready()
			b.followReloads(ctx, asked)
			return nil
		}})
	}
	return out
}

// backgroundParts are the parts that serve the ways in, in the order they stop:
// live-limit refresh, region shipper, heartbeat and the Cluster's shard watch.
func (b *Built) backgroundParts(cfg *config.Config, hb *heartbeat.Heartbeat, rdb redis.UniversalClient) []part {
	var out []part
	if c := b.live.cache; c != nil {
		out = append(out, part{name: "live limits", run: func(ctx context.Context, ready func()) error {
			ready()
			c.Run(ctx)
			return nil
		}})
	}
	if r := b.regions; r != nil {
		out = append(out, part{name: "region shipper", run: func(ctx context.Context, ready func()) error {
			r.set.Start()
			return waitDone(r.Close)(ctx, ready)
		}})
	}
	if hb != nil {
		out = append(out, part{name: "heartbeat", run: func(ctx context.Context, ready func()) error {
			hb.Start()
			return waitDone(hb.Close)(ctx, ready)
		}})
	}
	if st, ok := b.store.(*redisstore.Store); ok {
		if _, cluster := rdb.(*redis.ClusterClient); cluster {
			every := min(cfg.Store.Redis.Cluster.ReloadInterval, maxShardWatchInterval)
			out = append(out, part{name: "shard watch", run: func(ctx context.Context, ready func()) error {
				ready()
				watchShards(ctx, b.guard, st, every, b.live.logger)
				return nil
			}})
		}
	}
	return out
}
