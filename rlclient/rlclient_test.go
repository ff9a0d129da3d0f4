package rlclient

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeClock is a controllable clock: sleeping advances it instantly and
// records how long each wait was.
type fakeClock struct {
	mu     sync.Mutex
	t      time.Time
	sleeps []time.Duration
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sleeps = append(c.sleeps, d)
	c.t = c.t.Add(d)
	return nil
}

func (c *fakeClock) waits() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.sleeps...)
}

// withFakeClock returns a Transport on the fake clock.
func withFakeClock(cfg Config) (*Transport, *fakeClock) {
	clock := &fakeClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	tr := New(cfg)
	tr.now, tr.sleep = clock.now, clock.sleep
	return tr, clock
}

// scripted is an API server that answers each request with the next
// response of its script (the last one repeats) and counts the requests.
type scripted struct {
	mu     sync.Mutex
	script []func(w http.ResponseWriter)
	calls  int
	bodies []string
}

func (s *scripted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	i := min(s.calls, len(s.script)-1)
	s.calls++
	s.bodies = append(s.bodies, string(body))
	s.mu.Unlock()
	s.script[i](w)
}

func (s *scripted) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

func respond(status int, body string, headers ...string) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Add(headers[i], headers[i+1])
		}
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

func serve(t *testing.T, script ...func(http.ResponseWriter)) (*scripted, string) {
	t.Helper()
	s := &scripted{script: script}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return s, srv.URL
}

func get(t *testing.T, tr http.RoundTripper, url string) *http.Response {
	t.Helper()
	resp, err := (&http.Client{Transport: tr}).Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func TestRetryWaitsAsTheServerSays(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		headers []string
		want    time.Duration
	}{
		{"Retry-After in delta-seconds is waited", []string{"Retry-After", "7"}, 7 * time.Second},
		{"Retry-After as an HTTP-date is waited until that date", []string{"Retry-After", now.Add(42 * time.Second).Format(http.TimeFormat)}, 42 * time.Second},
		{"an HTTP-date in the past means no wait", []string{"Retry-After", now.Add(-time.Hour).Format(http.TimeFormat)}, 0},
		{"the RateLimit t alone is waited", []string{"RateLimit", `"default";r=0;t=12`}, 12 * time.Second},
		{"t later than Retry-After wins", []string{"Retry-After", "3", "RateLimit", `"default";r=0;t=9`}, 9 * time.Second},
		{"Retry-After later than t wins", []string{"Retry-After", "20", "RateLimit", `"default";r=0;t=9`}, 20 * time.Second},
		{"the exhausted policy's t counts, not a roomier one's", []string{"RateLimit", `"hour";r=500;t=3000, "minute";r=0;t=15`}, 15 * time.Second},
		{"policies split over two header lines are one list", []string{"RateLimit", `"hour";r=0;t=3000`, "RateLimit", `"minute";r=0;t=15`}, 3000 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			for i := 0; i < len(tc.headers); i += 2 {
				h.Add(tc.headers[i], tc.headers[i+1])
			}
			got, ok := RetryWait(h, now)
			if !ok || got != tc.want {
				t.Fatalf("RetryWait(%v) = %s, %v; want %s, true", h, got, ok, tc.want)
			}
		})
	}
}

func TestRetryWaitIgnoresWhatItCannotRead(t *testing.T) {
	for _, h := range []http.Header{
		{},
		{"Retry-After": {"soon"}},
		{"Retry-After": {"-5"}},
		{"Ratelimit": {`not a "list`}},
		{"Ratelimit": {`"default";r=0;t=-3`}},
		{"Ratelimit": {`"default";r=0;t="30"`}},
	} {
		if got, ok := RetryWait(h, time.Now()); ok {
			t.Errorf("RetryWait(%v) = %s, true; want no wait found", h, got)
		}
	}
}

func TestTransportRetriesAfterRetryAfter(t *testing.T) {
	api, url := serve(t,
		respond(429, "slow down", "Retry-After", "2"),
		respond(200, "ok"),
	)
	tr, clock := withFakeClock(Config{Jitter: -1})
	resp := get(t, tr, url)
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(body) != "ok" {
		t.Fatalf("got %d %q, want 200 ok", resp.StatusCode, body)
	}
	if api.count() != 2 {
		t.Errorf("server saw %d requests, want 2", api.count())
	}
	if w := clock.waits(); len(w) != 1 || w[0] != 2*time.Second {
		t.Errorf("waits = %v, want [2s]", w)
	}
}

func TestTransportHonoursTheRateLimitT(t *testing.T) {
	_, url := serve(t,
		respond(429, "", "Retry-After", "1", "RateLimit", `"default";r=0;t=5`),
		respond(503, "", "RateLimit", `"default";r=0;t=3`),
		respond(200, "ok"),
	)
	tr, clock := withFakeClock(Config{Jitter: -1})
	if resp := get(t, tr, url); resp.StatusCode != 200 {
		t.Fatalf("status %d, want 200", resp.StatusCode)
	}
	if w := clock.waits(); len(w) != 2 || w[0] != 5*time.Second || w[1] != 3*time.Second {
		t.Errorf("waits = %v, want [5s 3s] (t later than Retry-After, then t alone on a 503)", w)
	}
}

func TestTransportAddsJitterWithinItsBound(t *testing.T) {
	_, url := serve(t, respond(429, "", "Retry-After", "1"), respond(200, "ok"))
	tr, clock := withFakeClock(Config{Jitter: 500 * time.Millisecond})
	get(t, tr, url)
	w := clock.waits()
	if len(w) != 1 || w[0] < time.Second || w[0] >= 1500*time.Millisecond {
		t.Errorf("waits = %v, want one wait in [1s, 1.5s)", w)
	}
}

func TestTransportGivesUpAfterItsBoundReturningTheLast429(t *testing.T) {
	api, url := serve(t,
		respond(429, "first", "Retry-After", "1"),
		respond(429, "second", "Retry-After", "1"),
		respond(429, "last", "Retry-After", "1"),
		respond(200, "never reached"),
	)
	tr, clock := withFakeClock(Config{MaxRetries: 2, Jitter: -1})
	resp := get(t, tr, url)
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 429 || string(body) != "last" {
		t.Fatalf("got %d %q, want the last 429 with its body", resp.StatusCode, body)
	}
	if api.count() != 3 {
		t.Errorf("server saw %d requests, want 3 (one try + 2 retries)", api.count())
	}
	if resp.Header.Get("Retry-After") != "1" {
		t.Errorf("the returned 429 lost its headers: %v", resp.Header)
	}
	if len(clock.waits()) != 2 {
		t.Errorf("waits = %v, want 2", clock.waits())
	}
}

func TestTransportDoesNotWaitLongerThanMaxWait(t *testing.T) {
	api, url := serve(t, respond(429, "", "Retry-After", "3600"), respond(200, "ok"))
	tr, clock := withFakeClock(Config{MaxWait: 10 * time.Second})
	resp := get(t, tr, url)
	if resp.StatusCode != 429 || api.count() != 1 || len(clock.waits()) != 0 {
		t.Errorf("got %d after %d requests and waits %v; want the 429 at once", resp.StatusCode, api.count(), clock.waits())
	}
}

func TestAWaitTooLongForADurationIsTooLongNotZero(t *testing.T) {
	for name, h := range map[string]http.Header{
		"Retry-After":         {"Retry-After": {"99999999999"}},
		"the RateLimit field": {"Ratelimit": {`"default";r=0;t=999999999999999`}},
	} {
		t.Run(name, func(t *testing.T) {
			if wait, ok := RetryWait(h, time.Now()); !ok || wait < 100*365*24*time.Hour {
				t.Errorf("RetryWait = %s, %v; want a wait of a century or more", wait, ok)
			}
			api, url := serve(t, func(w http.ResponseWriter) {
				for k, v := range h {
					w.Header()[k] = v
				}
				w.WriteHeader(429)
			}, respond(200, "ok"))
			tr, clock := withFakeClock(Config{MaxWait: time.Minute, Jitter: -1})
			resp := get(t, tr, url)
			if resp.StatusCode != 429 || api.count() != 1 || len(clock.waits()) != 0 {
				t.Errorf("got %d after %d requests and waits %v; want the 429 at once, never an immediate retry", resp.StatusCode, api.count(), clock.waits())
			}
		})
	}
}

func TestTransportBacksOffWhenTheServerGivesNoHint(t *testing.T) {
	_, url := serve(t, respond(503, ""), respond(503, ""), respond(200, "ok"))
	tr, clock := withFakeClock(Config{Jitter: -1, FallbackWait: 100 * time.Millisecond})
	if resp := get(t, tr, url); resp.StatusCode != 200 {
		t.Fatalf("status %d, want 200", resp.StatusCode)
	}
	if w := clock.waits(); len(w) != 2 || w[0] != 100*time.Millisecond || w[1] != 200*time.Millisecond {
		t.Errorf("waits = %v, want [100ms 200ms]", w)
	}
}

func TestTransportReplaysBodiesOnlyWhenItCan(t *testing.T) {
	t.Run("a body with GetBody is sent again, whole", func(t *testing.T) {
		api, url := serve(t, respond(429, "", "Retry-After", "1"), respond(200, "ok"))
		tr, _ := withFakeClock(Config{Jitter: -1})
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader([]byte(`{"n":1}`)))
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || len(api.bodies) != 2 || api.bodies[0] != `{"n":1}` || api.bodies[1] != `{"n":1}` {
			t.Errorf("status %d, bodies %q; want 200 after the same body twice", resp.StatusCode, api.bodies)
		}
	})
	t.Run("a body that cannot be replayed is not retried", func(t *testing.T) {
		api, url := serve(t, respond(429, "", "Retry-After", "1"), respond(200, "ok"))
		tr, _ := withFakeClock(Config{Jitter: -1})
		req, _ := http.NewRequest(http.MethodPost, url, io.NopCloser(strings.NewReader("once")))
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 429 || api.count() != 1 {
			t.Errorf("status %d after %d requests; want the 429 after 1", resp.StatusCode, api.count())
		}
	})
}

func TestTransportStopsWaitingWhenTheContextIsCancelled(t *testing.T) {
	t.Parallel()
	api, url := serve(t, respond(429, "", "Retry-After", "30"), respond(200, "ok"))
	tr := New(Config{}) // the real clock: the wait is really cut short
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	start := time.Now()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	elapsed := time.Since(start)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("got status %d, want an error after cancel", resp.StatusCode)
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("error %v does not wrap context.Canceled", err)
	}
	if api.count() != 1 {
		t.Errorf("server saw %d requests, want 1", api.count())
	}
	if !raceEnabled && elapsed > 5*time.Second {
		t.Errorf("returned after %s, want soon after the cancel at 100ms (not the 30s wait)", elapsed)
	}
}

func TestTransportReallyWaitsRetryAfter(t *testing.T) {
	t.Parallel()
	var first atomic.Int64
	_, url := serve(t,
		func(w http.ResponseWriter) {
			first.Store(time.Now().UnixNano())
			respond(429, "", "Retry-After", "1")(w)
		},
		respond(200, "ok"),
	)
	tr := New(Config{Jitter: -1})
	resp := get(t, tr, url)
	gap := time.Since(time.Unix(0, first.Load()))
	if resp.StatusCode != 200 {
		t.Fatalf("status %d, want 200", resp.StatusCode)
	}
	if !raceEnabled && gap < 900*time.Millisecond {
		t.Errorf("retried %s after the 429, want about 1s", gap)
	}
}

func TestTransportSlowsDownWhenTheQuotaRunsLow(t *testing.T) {
	tests := []struct {
		name    string
		headers []string
		want    []time.Duration // waits before the 2nd and 3rd requests
	}{
		{"plenty left: no pacing", []string{"RateLimit", `"default";r=50;t=60`}, nil},
		{"2 left, reset in 30s: one request per 10s", []string{"RateLimit", `"default";r=2;t=30`}, []time.Duration{10 * time.Second, 10 * time.Second}},
		{"nothing left: wait for the reset", []string{"RateLimit", `"default";r=0;t=8`}, []time.Duration{8 * time.Second, 8 * time.Second}},
		{"the tightest policy paces", []string{"RateLimit", `"hour";r=900;t=3000, "minute";r=3;t=40`}, []time.Duration{10 * time.Second, 10 * time.Second}},
		// The reset is an instant: 20s away at first, 10s after the first wait.
		{"X-RateLimit headers with a Unix reset", []string{"X-RateLimit-Remaining", "1", "X-RateLimit-Reset", "1772366420"}, []time.Duration{10 * time.Second, 5 * time.Second}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			api, url := serve(t, respond(200, "ok", tc.headers...))
			tr, clock := withFakeClock(Config{SlowDownBelow: 5})
			if got := clock.now().Unix(); got != 1772366400 {
				t.Fatalf("fake clock at %d; the X-RateLimit-Reset case assumes 1772366400", got)
			}
			for range 3 {
				get(t, tr, url)
			}
			if api.count() != 3 {
				t.Fatalf("server saw %d requests, want 3", api.count())
			}
			got := clock.waits()
			if len(got) != len(tc.want) {
				t.Fatalf("waits = %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("waits = %v, want %v", got, tc.want)
				}
			}
		})
	}
}

func TestTransportWithoutSlowDownNeverPaces(t *testing.T) {
	_, url := serve(t, respond(200, "ok", "RateLimit", `"default";r=0;t=30`))
	tr, clock := withFakeClock(Config{})
	get(t, tr, url)
	get(t, tr, url)
	if w := clock.waits(); len(w) != 0 {
		t.Errorf("waits = %v, want none with SlowDownBelow 0", w)
	}
}

func TestQuotaReadsDeltaSecondsResets(t *testing.T) {
	h := http.Header{"X-Ratelimit-Remaining": {"4"}, "X-Ratelimit-Reset": {"25"}}
	r, reset, ok := Quota(h, time.Now())
	if !ok || r != 4 || reset != 25*time.Second {
		t.Errorf("Quota = %d, %s, %v; want 4, 25s, true", r, reset, ok)
	}
	if _, _, ok := Quota(http.Header{"X-Ratelimit-Remaining": {"many"}}, time.Now()); ok {
		t.Error("Quota read a non-numeric X-RateLimit-Remaining")
	}
}
