// Package rlclient is an http.RoundTripper for clients of a rate-limited
// API, such as one behind rl-exporter.
//
// It acts on the headers the server sends, so that a client backs off by
// itself instead of hammering an API that has already said no:
//
//   - on a 429 Too Many Requests or a 503 Service Unavailable it waits as the
//     server asks — the later of Retry-After (delta-seconds or an HTTP-date)
//     and the t parameter of the IETF RateLimit field
//     (draft-ietf-httpapi-ratelimit-headers-10: RateLimit: "policy";r=0;t=30)
//     — plus a random jitter, and retries, a bounded number of times;
//   - when the remaining quota runs low (the RateLimit field's r, or
//     X-RateLimit-Remaining) it paces the next requests to the same host so
//     that what is left lasts until the quota resets, instead of running into
//     a 429.
//
// Only requests whose body can be sent again are retried: requests without a
// body, and requests with GetBody set (http.NewRequest sets it for
// *bytes.Buffer, *bytes.Reader and *strings.Reader bodies). Every wait ends
// early when the request's context is done.
//
// A 429, and a 503 from rl-exporter's fail-closed policy, mean the request
// was not processed, so retrying is safe whatever the method; a 503 from the
// service behind the limiter may not mean that, so give requests that must
// never be repeated a Transport with MaxRetries -1.
package rlclient

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/dunglas/httpsfv"
)

// Defaults of Config.
const (
	DefaultMaxRetries   = 3
	DefaultMaxWait      = time.Minute
	DefaultJitter       = 250 * time.Millisecond
	DefaultFallbackWait = time.Second
)

// Config configures a Transport. The zero value of every field is a usable
// default.
type Config struct {
	// Base sends the requests. Default http.DefaultTransport.
	Base http.RoundTripper
	// MaxRetries is how many times one request is sent again after a 429 or
	// 503; after that the last response is returned as it is. Default
	// DefaultMaxRetries; negative disables retries (pacing still applies).
	MaxRetries int
	// MaxWait is the longest the Transport waits before one retry. When the
	// server asks for longer, the 429 or 503 is returned at once so that the
	// caller can decide. Default DefaultMaxWait.
	MaxWait time.Duration
	// Jitter is the upper bound of a random duration added to every retry
	// wait, so that clients told the same Retry-After do not all come back
	// at the same instant. Default DefaultJitter; negative disables.
	Jitter time.Duration
	// FallbackWait is the wait before the first retry of a 429 or 503 that
	// carries neither Retry-After nor a RateLimit t; it doubles on each
	// further retry. Default DefaultFallbackWait.
	FallbackWait time.Duration
	// SlowDownBelow turns on pacing: when a response says fewer than this
	// many requests remain in the quota and when the quota resets, the next
	// request to the same host waits resetIn/(remaining+1), spreading what is
	// left over the time until the reset (with nothing left, it waits for
	// the reset). Zero disables pacing.
	SlowDownBelow int64
	// Logger receives a debug line per wait. Default: discard.
	Logger *slog.Logger
}

// Transport is an http.RoundTripper that retries rate-limited requests and
// paces requests when the quota runs low. It is safe for concurrent use by
// many goroutines; the pacing state is shared by all requests to one host
// (URL.Host).
type Transport struct {
	base          http.RoundTripper
	maxRetries    int
	maxWait       time.Duration
	jitter        time.Duration
	fallbackWait  time.Duration
	slowDownBelow int64
	log           *slog.Logger

	// now and sleep are the clock; tests replace them.
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error

	mu        sync.Mutex
	notBefore map[string]time.Time // host → earliest time of its next request
}

// New returns a Transport configured by cfg (defaults filled in).
func New(cfg Config) *Transport {
	t := &Transport{
		base:          cfg.Base,
		maxRetries:    cfg.MaxRetries,
		maxWait:       cfg.MaxWait,
		jitter:        cfg.Jitter,
		fallbackWait:  cfg.FallbackWait,
		slowDownBelow: cfg.SlowDownBelow,
		log:           cfg.Logger,
		now:           time.Now,
		sleep:         sleepCtx,
		notBefore:     map[string]time.Time{},
	}
	if t.base == nil {
		t.base = http.DefaultTransport
	}
	switch {
	case t.maxRetries == 0:
		t.maxRetries = DefaultMaxRetries
	case t.maxRetries < 0:
		t.maxRetries = 0
	}
	if t.maxWait <= 0 {
		t.maxWait = DefaultMaxWait
	}
	switch {
	case t.jitter == 0:
		t.jitter = DefaultJitter
	case t.jitter < 0:
		t.jitter = 0
	}
	if t.fallbackWait <= 0 {
		t.fallbackWait = DefaultFallbackWait
	}
	if t.log == nil {
		t.log = slog.New(slog.DiscardHandler)
	}
	return t
}

// RoundTrip sends req, waiting first when the host is being paced, and
// sends it again after a 429 or 503 as described in the package
// documentation. It returns the first response that is neither, or the last
// 429/503 once the retries are used up, the request cannot be replayed or the
// server asks for a wait longer than MaxWait. It returns an error wrapping
// the context's error when the request's context ends during a wait.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	host := req.URL.Host
	replayable := req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
	for attempt := 0; ; attempt++ {
		if err := t.pace(ctx, req, host); err != nil {
			return nil, err
		}
		out := req
		if attempt > 0 {
			out = req.Clone(ctx)
			if req.GetBody != nil {
				body, err := req.GetBody()
				if err != nil {
					return nil, fmt.Errorf("rlclient: replay body of %s %s: %w", req.Method, req.URL.Redacted(), err)
				}
				out.Body = body
			}
		}
		resp, err := t.base.RoundTrip(out)
		if err != nil {
			return nil, err
		}
		now := t.now()
		limited := resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable
		if !limited {
			t.observeQuota(host, resp.Header, now)
			return resp, nil
		}
		if !replayable || attempt >= t.maxRetries {
			return resp, nil
		}
		wait, ok := RetryWait(resp.Header, now)
		if !ok {
			// No hint from the server: exponential backoff, capped.
			wait = t.fallbackWait
			for i := 0; i < attempt && wait < t.maxWait; i++ {
				wait *= 2
			}
			wait = min(wait, t.maxWait)
		}
		if wait > t.maxWait {
			return resp, nil
		}
		if t.jitter > 0 {
			wait += rand.N(t.jitter)
		}
		// Let the response go before waiting so its connection can be reused.
		_, _ = io.CopyN(io.Discard, resp.Body, 64<<10)
		resp.Body.Close()
		t.log.DebugContext(ctx, "rate limited, waiting before retry",
			"method", req.Method, "host", host, "status", resp.StatusCode, "attempt", attempt+1, "wait", wait)
		// Holding the host makes concurrent requests to it wait too: they
		// would be refused for the same reason.
		t.hold(host, now.Add(wait))
	}
}

// pace waits until the host's next request may go.
func (t *Transport) pace(ctx context.Context, req *http.Request, host string) error {
	t.mu.Lock()
	nb, ok := t.notBefore[host]
	t.mu.Unlock()
	if !ok {
		return nil
	}
	d := nb.Sub(t.now())
	if d <= 0 {
		return nil
	}
	if err := t.sleep(ctx, d); err != nil {
		return fmt.Errorf("rlclient: waiting %s before %s %s: %w", d.Round(time.Millisecond), req.Method, req.URL.Redacted(), err)
	}
	return nil
}

// hold makes the host's next request wait until at least until.
func (t *Transport) hold(host string, until time.Time) {
	t.mu.Lock()
	if until.After(t.notBefore[host]) {
		t.notBefore[host] = until
	}
	t.mu.Unlock()
}

// observeQuota sets or clears the host's pacing from an accepted response.
func (t *Transport) observeQuota(host string, h http.Header, now time.Time) {
	if t.slowDownBelow <= 0 {
		return
	}
	remaining, resetIn, ok := Quota(h, now)
	if !ok || remaining >= t.slowDownBelow || resetIn <= 0 {
		t.mu.Lock()
		if nb, held := t.notBefore[host]; held && !nb.After(now) {
			delete(t.notBefore, host)
		}
		t.mu.Unlock()
		return
	}
	gap := resetIn / time.Duration(remaining+1)
	if gap > t.maxWait {
		gap = t.maxWait
	}
	t.hold(host, now.Add(gap))
}

// RetryWait is how long a 429 or 503 response with header h, received at
// now, asks the client to wait: the later of Retry-After (delta-seconds or
// HTTP-date) and the RateLimit field's t. The t of the exhausted policies
// (r=0) counts when there are any, otherwise the largest t. ok is false when
// neither header is present and valid. It is a pure function.
func RetryWait(h http.Header, now time.Time) (wait time.Duration, ok bool) {
	if v := h.Get("Retry-After"); v != "" {
		if secs, err := strconv.ParseInt(v, 10, 64); err == nil && secs >= 0 {
			wait, ok = seconds(secs), true
		} else if at, err := http.ParseTime(v); err == nil {
			wait, ok = max(at.Sub(now), 0), true
		}
	}
	policies := rateLimitField(h)
	var exhausted, any time.Duration
	var haveExhausted, haveAny bool
	for _, p := range policies {
		if !p.hasT {
			continue
		}
		any, haveAny = max(any, p.t), true
		if p.hasR && p.r == 0 {
			exhausted, haveExhausted = max(exhausted, p.t), true
		}
	}
	switch {
	case haveExhausted:
		wait, ok = max(wait, exhausted), true
	case haveAny:
		wait, ok = max(wait, any), true
	}
	return wait, ok
}

// Quota reads the remaining quota and the time until it resets from the
// headers of a response received at now: from the RateLimit field (the
// policy with the fewest remaining), else from X-RateLimit-Remaining and
// X-RateLimit-Reset (Unix seconds; values below 10^9 are taken as
// delta-seconds, as some servers send). resetIn is 0 when unknown. ok is
// false when no remaining count is present. It is a pure function.
func Quota(h http.Header, now time.Time) (remaining int64, resetIn time.Duration, ok bool) {
	for _, p := range rateLimitField(h) {
		if p.hasR && (!ok || p.r < remaining) {
			remaining, resetIn, ok = p.r, p.t, true
		}
	}
	if ok {
		return remaining, resetIn, true
	}
	r, err := strconv.ParseInt(h.Get("X-RateLimit-Remaining"), 10, 64)
	if err != nil || r < 0 {
		return 0, 0, false
	}
	if reset, err := strconv.ParseInt(h.Get("X-RateLimit-Reset"), 10, 64); err == nil && reset >= 0 {
		if reset < 1e9 {
			resetIn = seconds(reset)
		} else {
			resetIn = max(time.Unix(reset, 0).Sub(now), 0)
		}
	}
	return r, resetIn, true
}

// policy is one member of the RateLimit field.
type policy struct {
	r          int64
	t          time.Duration
	hasR, hasT bool
}

// rateLimitField parses the RateLimit field, a Structured Field list of
// policies with the parameters r (remaining) and t (delay-seconds until the
// quota resets). An unparsable field is ignored: the client falls back to
// the other headers rather than failing a request the server answered.
func rateLimitField(h http.Header) []policy {
	vals := h.Values("RateLimit")
	if len(vals) == 0 {
		return nil
	}
	list, err := httpsfv.UnmarshalList(vals)
	if err != nil {
		return nil
	}
	out := make([]policy, 0, len(list))
	for _, m := range list {
		item, isItem := m.(httpsfv.Item)
		if !isItem || item.Params == nil {
			continue
		}
		var p policy
		if v, found := item.Params.Get("r"); found {
			p.r, p.hasR = nonNegInt(v)
		}
		if v, found := item.Params.Get("t"); found {
			var secs int64
			secs, p.hasT = nonNegInt(v)
			p.t = seconds(secs)
		}
		out = append(out, p)
	}
	return out
}

// seconds converts n ≥ 0 seconds to a Duration, saturating at the largest
// one instead of overflowing into a negative wait (a server that says
// "retry in 10^12 seconds" must not be retried at once).
func seconds(n int64) time.Duration {
	if n > int64(math.MaxInt64/time.Second) {
		return math.MaxInt64
	}
	return time.Duration(n) * time.Second
}

// nonNegInt accepts a Structured Field integer ≥ 0.
func nonNegInt(v any) (int64, bool) {
	n, isInt := v.(int64)
	if !isInt || n < 0 {
		return 0, false
	}
	return n, true
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
