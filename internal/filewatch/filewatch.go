// Package filewatch tells when the content of files changes: the config
// file (with file-system notifications beside the polling) and the rate
// limit service's rules directory (polling alone) are watched by the same
// loop, comparing SHA-256 digests, so that a touched but unchanged file
// never causes a reload and a reload asked for is never applied twice.
package filewatch

import (
	"context"
	"crypto/sha256"
	"os"
	"time"
)

// Config says what Run watches and when it looks.
type Config struct {
	// Digest hashes the watched content; the zero digest means it cannot
	// be read just now (a file in the middle of a replacement), which is
	// not a change.
	Digest func() [32]byte
	// Since is the digest of the content the caller has applied: content
	// that differs from it is a change, even when it changed before Run
	// started. Zero: the content Run reads when it starts.
	Since [32]byte
	// Interval is the period of the content check; 0: never (then only
	// Notify and Trigger look).
	Interval time.Duration
	// OnTick, when set, runs before each periodic check (to re-arm a
	// notification watch that ended).
	OnTick func()
	// Notify, when set, asks for a check after Debounce, so that a writer
	// can finish (truncate, then write) before the content is read; with a
	// Debounce, new content counts only once it reads the same Debounce
	// later.
	Notify   <-chan struct{}
	Debounce time.Duration
	// Trigger, when set, is a change at each receive whatever the content
	// (the reload an operator asks for with SIGHUP); the content read then
	// becomes the last seen, so the checks that follow do not apply it
	// again.
	Trigger <-chan struct{}
}

// Run calls onChange each time the digest differs from the last seen, and
// at each receive on c.Trigger, until ctx is done. With an Interval, it
// checks once at start too. onChange runs on Run's goroutine, one call at
// a time. Run blocks.
func Run(ctx context.Context, c Config, onChange func()) {
	last := c.Since
	if last == ([32]byte{}) {
		last = c.Digest()
	}
	check := func() {
		h := c.Digest()
		if h == last || h == ([32]byte{}) {
			return
		}
		if c.Debounce > 0 {
			// A poll can land between a writer's truncate and its write: the
			// content counts once it holds still for Debounce; the next look
			// sees where it settled.
			select {
			case <-time.After(c.Debounce):
			case <-ctx.Done():
				return
			}
			if c.Digest() != h {
				return
			}
		}
		last = h
		onChange()
	}
	var tick <-chan time.Time
	if c.Interval > 0 {
		t := time.NewTicker(c.Interval)
		defer t.Stop()
		tick = t.C
		check()
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.Notify:
			select {
			case <-time.After(c.Debounce):
			case <-ctx.Done():
				return
			}
		case <-tick:
			if c.OnTick != nil {
				c.OnTick()
			}
		case <-c.Trigger:
			last = c.Digest()
			onChange()
			continue
		}
		check()
	}
}

// HashFile returns the SHA-256 of the file at path, or zero when it cannot
// be read.
func HashFile(path string) [32]byte {
	b, err := os.ReadFile(path)
	if err != nil {
		return [32]byte{}
	}
	return sha256.Sum256(b)
}
