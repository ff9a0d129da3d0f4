// Package heartbeat keeps count of the rl-exporter instances that share a
// Redis store: each instance announces itself in a sorted set, scored by
// Redis's clock, every interval, and learns how many announced themselves
// within the TTL. fail_policy local divides a limit by that count while
// Redis is down, so that the instances together keep the global budget.
//
// The count is the last one Redis gave: while Redis is down it stays as it
// was, which is what a degraded decision needs.
package heartbeat

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
)

//go:embed beat.lua
var beatLua string

// beatScript is sent as the store sends its own scripts (redisstore.Script):
// by its SHA1, whole once Redis answers NOSCRIPT.
var beatScript = redisstore.NewScript(beatLua)

// Defaults of Config.
const (
	DefaultInterval = time.Second
	DefaultTTL      = 5 * time.Second
	// DefaultKeySuffix follows the store's key prefix: "rl:instances".
	DefaultKeySuffix = "instances"
)

// Config configures a Heartbeat. Client is required.
type Config struct {
	// Client reaches the Redis the instances share.
	Client redis.UniversalClient
	// Key is the sorted set of live instances. Default "rl:instances".
	Key string
	// ID names this instance in the set. Default: host name, process id
	// and a random suffix.
	ID string
	// Interval is the time between two heartbeats. Default DefaultInterval.
	Interval time.Duration
	// TTL is how long an instance counts as live after its last heartbeat;
	// longer than Interval. Default DefaultTTL.
	TTL time.Duration
	// Logger is told when heartbeats start failing and when they succeed
	// again (one line each, never one per heartbeat). Default: discard.
	Logger *slog.Logger
}

// Heartbeat announces this instance and counts the live ones. Its methods
// are safe for concurrent use; InstanceCount is a single atomic load.
type Heartbeat struct {
	cfg   Config
	count atomic.Int64

	mu sync.Mutex // guards what follows
	// failing is true from a failed heartbeat to the next successful one.
	failing bool
	// held is the count from before the last failure, and holdUntil when
	// it stops counting: a Redis that comes back empty knows only the
	// instances that have beaten since, so for one TTL the count is at
	// least what it was.
	held      int64
	holdUntil time.Time

	startOnce, closeOnce sync.Once
	stop, done           chan struct{}
}

// New validates cfg and returns a Heartbeat that has not beaten yet (count 0).
func New(cfg Config) (*Heartbeat, error) {
	if cfg.Client == nil {
		return nil, errors.New("heartbeat: Client is required")
	}
	if cfg.Key == "" {
		cfg.Key = "rl:" + DefaultKeySuffix
	}
	if cfg.ID == "" {
		host, _ := os.Hostname()
		cfg.ID = host + "-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatUint(rand.Uint64()&0xffffffff, 16)
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.TTL <= cfg.Interval {
		return nil, fmt.Errorf("heartbeat: TTL %s must be longer than Interval %s", cfg.TTL, cfg.Interval)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Heartbeat{cfg: cfg, stop: make(chan struct{}), done: make(chan struct{})}, nil
}

// ID is this instance's id in the set.
func (h *Heartbeat) ID() string { return h.cfg.ID }

// InstanceCount returns the number of live instances Redis last reported,
// 0 before the first successful heartbeat. Part of limiter.InstanceCounter.
func (h *Heartbeat) InstanceCount() int { return int(h.count.Load()) }

// Beat announces this instance once and updates the count.
//
// After a failure, the count stays at least the one before it for one TTL
// after the first success: a Redis that comes back empty knows only the
// instances that have beaten since.
func (h *Heartbeat) Beat(ctx context.Context) (int, error) {
	n, err := beatScript.Run(ctx, h.cfg.Client, []string{h.cfg.Key}, h.cfg.ID, h.cfg.TTL.Milliseconds()).Int64()
	h.mu.Lock()
	defer h.mu.Unlock()
	if err != nil {
		if !h.failing {
			h.failing, h.held = true, h.count.Load()
		}
		return 0, fmt.Errorf("heartbeat %s: %w", h.cfg.Key, err)
	}
	now := time.Now()
	if h.failing {
		h.failing, h.holdUntil = false, now.Add(h.cfg.TTL)
	}
	if now.Before(h.holdUntil) {
		n = max(n, h.held)
	}
	h.count.Store(n)
	return int(n), nil
}

// Start beats now and then every Interval in a goroutine, until Close.
func (h *Heartbeat) Start() {
	h.startOnce.Do(func() { go h.run() })
}

func (h *Heartbeat) run() {
	defer close(h.done)
	t := time.NewTicker(h.cfg.Interval)
	defer t.Stop()
	for {
		h.beatLogged()
		select {
		case <-h.stop:
			return
		case <-t.C:
		}
	}
}

// beatLogged beats once, bounded by Interval, and logs a change between
// failing and succeeding.
func (h *Heartbeat) beatLogged() {
	h.mu.Lock()
	wasFailing := h.failing
	h.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), h.cfg.Interval)
	n, err := h.Beat(ctx)
	cancel()
	switch {
	case err != nil && !wasFailing:
		h.cfg.Logger.Warn("instance heartbeat failing: the instance count stays at its last value",
			slog.Int("instances", h.InstanceCount()), slog.String("error", err.Error()))
	case err == nil && wasFailing:
		h.cfg.Logger.Info("instance heartbeat back", slog.Int("instances", n))
	}
}

// Close stops the heartbeats and removes this instance from the set (at
// most one Interval spent on it), so that the others count one less at
// once rather than after the TTL.
func (h *Heartbeat) Close() error {
	var err error
	h.closeOnce.Do(func() {
		close(h.stop)
		h.startOnce.Do(func() { close(h.done) }) // never started
		<-h.done
		ctx, cancel := context.WithTimeout(context.Background(), h.cfg.Interval)
		defer cancel()
		if e := h.cfg.Client.ZRem(ctx, h.cfg.Key, h.cfg.ID).Err(); e != nil {
			err = fmt.Errorf("heartbeat %s: leave: %w", h.cfg.Key, e)
		}
	})
	return err
}
