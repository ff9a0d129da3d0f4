package decision

import (
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/dunglas/httpsfv"

	"github.com/rl-exporter/rl-exporter/limiter"
)

func TestHeaderNamesAreInTheFormNetHTTPKeepsThemIn(t *testing.T) {
	for _, k := range []string{HeaderXLimit, HeaderXRemaining, HeaderXReset, HeaderPolicy, HeaderRateLimit,
		HeaderLegacyLimit, HeaderLegacyRemaining, HeaderLegacyReset, HeaderRetryAfter} {
		if c := http.CanonicalHeaderKey(k); c != k {
			t.Errorf("header key %q is not canonical (%q): Header.Get would not find it", k, c)
		}
	}
}

// sfField is the structured field a client parses: the policy name and
// its parameters.
func sfField(t *testing.T, v string) (string, map[string]int64) {
	t.Helper()
	l, err := httpsfv.UnmarshalList([]string{v})
	if err != nil || len(l) != 1 {
		t.Fatalf("field %q does not parse as a one-item structured list: %v", v, err)
	}
	it := l[0].(httpsfv.Item)
	params := map[string]int64{}
	for _, name := range it.Params.Names() {
		p, _ := it.Params.Get(name)
		params[name] = p.(int64)
	}
	return it.Value.(string), params
}

func TestEveryHeaderFamilyAgreesAndParses(t *testing.T) {
	now := time.Unix(1_700_000_000, 250_000_000)
	lim := limiter.PerMinute(limiter.GCRA, 100)
	rl := RenderLimit("public", lim)
	cases := map[string]struct {
		d         limiter.Decision
		remaining int64
		reset     int64 // X-RateLimit-Reset
		t         int64
		retry     string
	}{
		"an allowed request": {
			d:         limiter.Decision{Allowed: true, Limit: 100, Remaining: 42, ResetAfter: 1500 * time.Millisecond},
			remaining: 42, reset: 1_700_000_002, t: 2,
		},
		"a refused request": {
			d:         limiter.Decision{Limit: 100, ResetAfter: 30 * time.Second, RetryAfter: 600 * time.Millisecond},
			remaining: 0, reset: 1_700_000_031, t: 1, retry: "1",
		},
		"a reset in the past, from a store whose clock runs ahead, is now": {
			d:         limiter.Decision{Allowed: true, Limit: 100, Remaining: -3, ResetAfter: -time.Hour},
			remaining: 0, reset: 1_700_000_001, t: 0,
		},
		"the longest durations round up without overflowing": {
			d:         limiter.Decision{Limit: 100, ResetAfter: math.MaxInt64, RetryAfter: math.MaxInt64},
			remaining: 0, reset: 1_700_000_000 + 9_223_372_038, t: 9_223_372_037, retry: "9223372037",
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			h := http.Header{}
			HeaderConfig{Legacy: true}.Write(h, FieldsOf(rl, c.d, now))
			want := map[string]string{
				"X-RateLimit-Limit": "100", "X-RateLimit-Remaining": strconv.FormatInt(c.remaining, 10),
				"X-RateLimit-Reset": strconv.FormatInt(c.reset, 10), "RateLimit-Limit": "100",
				"RateLimit-Remaining": strconv.FormatInt(c.remaining, 10), "Retry-After": c.retry,
			}
			for k, v := range want {
				if got := h.Get(k); got != v {
					t.Errorf("%s: %q, want %q", k, got, v)
				}
			}
			if got, _ := strconv.ParseInt(h.Get("RateLimit-Reset"), 10, 64); got != c.t {
				t.Errorf("RateLimit-Reset %q, want %d", h.Get("RateLimit-Reset"), c.t)
			}
			name, pol := sfField(t, h.Get("RateLimit-Policy"))
			if name != "public" || pol["q"] != 100 || pol["w"] != 60 {
				t.Errorf("RateLimit-Policy %q, want public with q=100 and w=60", h.Get("RateLimit-Policy"))
			}
			name, cur := sfField(t, h.Get("RateLimit"))
			if name != "public" || cur["r"] != c.remaining || cur["t"] != c.t || cur["t"] < 0 {
				t.Errorf("RateLimit %q, want public with r=%d and t=%d", h.Get("RateLimit"), c.remaining, c.t)
			}
		})
	}
}

func TestAQuotaBeyondStructuredFieldIntegersSaturates(t *testing.T) {
	lim := limiter.Limit{Algorithm: limiter.TokenBucket, Rate: 1, Period: time.Second, Burst: 2_000_000_000_000_000}
	rl := RenderLimit("huge", lim)
	h := http.Header{}
	HeaderConfig{}.Write(h, FieldsOf(rl, limiter.Decision{Allowed: true, Remaining: 1_999_999_999_999_999}, time.Unix(0, 0)))
	if got := h.Get("X-RateLimit-Limit"); got != "2000000000000000" {
		t.Errorf("X-RateLimit-Limit %q, want the quota in full", got)
	}
	if _, pol := sfField(t, h.Get("RateLimit-Policy")); pol["q"] != maxSFInteger {
		t.Errorf("RateLimit-Policy %q: q, want %d", h.Get("RateLimit-Policy"), maxSFInteger)
	}
	if _, cur := sfField(t, h.Get("RateLimit")); cur["r"] != maxSFInteger {
		t.Errorf("RateLimit %q: r, want %d", h.Get("RateLimit"), maxSFInteger)
	}
}

func TestWritingTheHeadersTakesTwoAllocations(t *testing.T) {
	rl := RenderLimit("default", limiter.PerMinute(limiter.GCRA, 100))
	d := limiter.Decision{Allowed: true, Limit: 100, Remaining: 99, ResetAfter: 600 * time.Millisecond}
	now := time.Now()
	h := make(http.Header, 16)
	for name, hc := range map[string]HeaderConfig{"default families": {}, "every family": {Legacy: true}} {
		allocs := testing.AllocsPerRun(200, func() {
			hc.Write(h, FieldsOf(rl, d, now))
		})
		if allocs > 2 {
			t.Errorf("%s: %.1f allocations to write the headers, want at most 2 (one string, one slice array)", name, allocs)
		}
	}
}

// TestResetUnixIsResetAt: the Unix second FieldsOf writes is ResetAt's, for instants on and off
// whole seconds and microseconds and resets of none, less than a second, whole seconds and more.
func TestResetUnixIsResetAt(t *testing.T) {
	bases := []time.Time{
		time.Unix(1_700_000_000, 0), time.Unix(1_700_000_000, 999), time.Unix(1_700_000_000, 1000),
		time.Unix(1_700_000_000, 999_999_999), time.Unix(1_700_000_000, 500_000_001), time.Now(),
		time.Unix(-5, 123_456_789),
	}
	resets := []time.Duration{-time.Second, 0, 1, time.Microsecond, 999 * time.Millisecond, time.Second,
		time.Second + 1, 59*time.Second + 999_999*time.Microsecond, time.Hour, 36 * time.Hour, math.MaxInt64}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		bases = append(bases, time.Unix(rng.Int64N(4_000_000_000), rng.Int64N(1e9)))
		resets = append(resets, time.Duration(rng.Int64N(int64(48*time.Hour))))
	}
	for i, now := range bases {
		for _, ra := range []time.Duration{resets[i%len(resets)], resets[(i*7+3)%len(resets)], resets[i%10]} {
			if got, want := resetUnix(now, ra), ResetAt(now, ra).Unix(); got != want {
				t.Errorf("resetUnix(%v, %v) = %d, ResetAt's %d", now, ra, got, want)
			}
		}
	}
}
