package admin

import (
	"cmp"
	"log/slog"
	"net/http"
	"sync"
	"time"
)

// DefaultFailureInterval is the least time between two log lines of
// refused tokens.
const DefaultFailureInterval = 10 * time.Second

// AuthFailures counts the requests a TokenGuard refused for a missing or wrong
// token and logs them: a WARN line at most once per Interval, with how
// many were refused since the line before and the last peer, so that a
// guessing client can neither go unseen nor flood the log. Set its fields
// before first use; it is then safe for concurrent use.
type AuthFailures struct {
	// Logger receives the lines. Default: discard.
	Logger *slog.Logger
	// Interval is the least time between two lines. Default
	// DefaultFailureInterval.
	Interval time.Duration
	// Now is the clock of Interval; default time.Now.
	Now func() time.Time

	mu      sync.Mutex
	total   uint64
	pending uint64 // refused since the last line
	last    time.Time
}

// Total returns how many requests were refused since start.
func (f *AuthFailures) Total() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.total
}

func (f *AuthFailures) add(r *http.Request, presented bool) {
	now := time.Now
	if f.Now != nil {
		now = f.Now
	}
	interval := cmp.Or(f.Interval, DefaultFailureInterval)
	t := now()
	f.mu.Lock()
	f.total++
	f.pending++
	if !f.last.IsZero() && t.Sub(f.last) < interval {
		f.mu.Unlock()
		return
	}
	n := f.pending
	f.last, f.pending = t, 0
	f.mu.Unlock()
	if f.Logger == nil {
		return
	}
	reason := "no bearer token"
	if presented {
		reason = "a wrong bearer token"
	}
	f.Logger.LogAttrs(r.Context(), slog.LevelWarn, "admin: requests refused for their token",
		slog.Uint64("refused", n),
		slog.String("last_peer", r.RemoteAddr), slog.String("last_path", r.URL.Path), slog.String("last_reason", reason))
}
