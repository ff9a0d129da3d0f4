package config

import (
	"context"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/knadh/koanf/providers/file"
	"github.com/rl-exporter/rl-exporter/internal/filewatch"
)

// watchDebounce lets an editor finish writing (truncate, then write) before
// the file is read.
const watchDebounce = 100 * time.Millisecond

// WatchConfig says which file Watch watches and from which content.
type WatchConfig struct {
	// Path is the file.
	Path string
	// Interval is the period of the content check; it must be > 0.
	Interval time.Duration
	// Since is the SHA-256 of the content the caller has applied
	// (Config.Digest). A file whose content differs from it is a change,
	// even when it changed before Watch started (between the load and the
	// watch, an edit would otherwise be taken for the starting content
	// and never applied). Zero: the content Watch reads when it starts.
	Since [32]byte
	// Logger gets the watch's warnings; nil discards them.
	Logger *slog.Logger
	// Trigger, when set, is a third way in: each receive is a change
	// whatever the content (the reload an operator asks for with SIGHUP),
	// taken on Watch's goroutine like the others, so that it is never
	// applied twice over by the content check that follows.
	Trigger <-chan struct{}
	// tick, when set, runs before each periodic check: a test counts the
	// checks with it, so that it waits for one instead of for a time.
	tick func()
}

// Watch calls onChange each time the content of the file at w.Path
// changes, until ctx is done. Two triggers feed it: file-system
// notifications (fsnotify, through koanf's file provider, which also
// follows the symlink swap by which Kubernetes updates a mounted
// ConfigMap), debounced by 100ms; and a check every w.Interval, the safety
// net for file systems without notifications (NFS, some container mounts)
// and for a file that was removed and created again, which ends a
// notification watch. Either way the file is hashed and onChange runs only
// when the content differs from the last seen (at first w.Since), so
// duplicate events never cause duplicate reloads; a file that already
// differs from w.Since when Watch starts is a change at once; a receive on
// w.Trigger is a change whatever the content. onChange runs
// on Watch's goroutine, one call at a time. Watch blocks.
func Watch(ctx context.Context, w WatchConfig, onChange func()) {
	path, interval, logger := w.Path, w.Interval, w.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	notify := make(chan struct{}, 1)
	var fp *file.File
	var alive atomic.Bool
	arm := func() {
		if alive.Load() {
			return
		}
		if fp != nil {
			_ = fp.Unwatch()
			fp = nil
		}
		// koanf's Watch must not be called on a missing file.
		if _, err := os.Stat(path); err != nil {
			return
		}
		p := file.Provider(path)
		err := p.Watch(func(_ any, err error) {
			if err != nil {
				alive.Store(false)
				logger.Warn("config file watch ended; checking every interval until it can be watched again",
					slog.String("file", path), slog.String("error", err.Error()), slog.Duration("interval", interval))
			}
			select {
			case notify <- struct{}{}:
			default:
			}
		})
		if err == nil {
			fp = p
			alive.Store(true)
		}
	}
	arm()
	defer func() {
		if fp != nil {
			_ = fp.Unwatch()
		}
	}()
	filewatch.Run(ctx, filewatch.Config{
		Digest: func() [32]byte { return filewatch.HashFile(path) }, Since: w.Since,
		Interval: interval, OnTick: func() {
			arm() // re-arm a notification watch that ended (the file was removed)
			if w.tick != nil {
				w.tick()
			}
		},
		Notify: notify, Debounce: watchDebounce, Trigger: w.Trigger,
	}, onChange)
}
