package httplimit

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/dunglas/httpsfv"

	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/rlclient"
)

// maxSF is the largest Structured Field integer (RFC 8941, section 3.3.1).
const maxSF = 999_999_999_999_999

// FuzzRateLimitHeaders sends a few requests through the middleware under
// any limit the limiter accepts (algorithm, rate, period, burst, cost, time
// between requests) and reads every response's rate-limit headers back as a
// client would: with a Structured Field parser and with rlclient. Each
// header must parse, no number may be negative, the families must agree
// with each other and with the limit, a 429 must say when to retry, and a
// client whose quota is not whole again must not be told it resets now.
func FuzzRateLimitHeaders(f *testing.F) {
	// alg, rate, period (ns), burst, cost, requests, step (ns), legacy
	f.Add(uint8(0), int64(5), int64(time.Minute), int64(0), int64(1), uint8(7), int64(0), false)
	f.Add(uint8(1), int64(3), int64(time.Second), int64(0), int64(2), uint8(4), int64(300*time.Millisecond), true)
	f.Add(uint8(2), int64(1), int64(2_000_000*time.Hour), int64(0), int64(1), uint8(2), int64(0), false)
	f.Add(uint8(3), int64(10), int64(time.Second), int64(20), int64(7), uint8(5), int64(150*time.Millisecond), true)
	f.Add(uint8(4), int64(2), int64(time.Hour), int64(3), int64(1), uint8(6), int64(time.Millisecond), false)
	f.Add(uint8(5), int64(1_000_000), int64(time.Millisecond), int64(0), int64(999_999), uint8(3), int64(0), false)
	f.Fuzz(func(t *testing.T, alg uint8, rate, period, burst, cost int64, requests uint8, step int64, legacy bool) {
		lim := limiter.Limit{
			Algorithm: limiter.AllAlgorithms()[int(alg)%limiter.NumAlgorithms],
			Rate:      rate, Period: time.Duration(period), Burst: burst,
			// A leaky_bucket admission is otherwise held for its delay, in
			// real time; the headers are written before and are the same.
			NoDelay: true,
		}
		if lim.Validate() != nil {
			return // not a limit anyone can configure
		}
		quota := lim.Quota()
		cost = 1 + int64(uint64(cost)%uint64(quota))
		advance := time.Duration(uint64(step) % uint64(400*24*time.Hour))

		clk := newClock()
		p, err := NewPolicy(PolicyConfig{
			Store:   limiter.NewMemoryStore(limiter.MemoryConfig{Now: clk.Now, Shards: 1}),
			Classes: []Class{oneClass("api", lim)},
			Headers: HeaderConfig{Legacy: legacy},
		})
		if err != nil {
			t.Fatalf("NewPolicy(%+v): %v", lim, err)
		}
		m, err := New(Config{Policy: p, Now: clk.Now, Cost: func(*http.Request) int64 { return cost }})
		if err != nil {
			t.Fatal(err)
		}
		h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
		for i := range 1 + int(requests%8) {
			if i > 0 {
				clk.Advance(advance)
			}
			now := clk.Now()
			w := httptest.NewRecorder()
			h.ServeHTTP(w, newRequest(http.MethodGet, "/things", "192.0.2.7:4000"))
			where := fmt.Sprintf("limit %+v, cost %d, request %d at +%s", lim, cost, i+1, now.Sub(time.Unix(1_700_000_000, 0)))
			checkRateLimitHeaders(t, where, w, now, quota, legacy)
		}
	})
}

// checkRateLimitHeaders checks one response of the "api" class.
func checkRateLimitHeaders(t *testing.T, where string, w *httptest.ResponseRecorder, now time.Time, quota int64, legacy bool) {
	t.Helper()
	hdr := w.Result().Header
	if w.Code != http.StatusOK && w.Code != http.StatusTooManyRequests {
		t.Fatalf("%s: status %d, want 200 or 429", where, w.Code)
	}
	integer := func(name string) int64 {
		t.Helper()
		v, err := strconv.ParseInt(hdr.Get(name), 10, 64)
		if err != nil {
			t.Fatalf("%s: %s %q is not an integer", where, name, hdr.Get(name))
		}
		if v < 0 {
			t.Fatalf("%s: %s is negative: %d", where, name, v)
		}
		return v
	}
	limit, remaining, reset := integer("X-RateLimit-Limit"), integer("X-RateLimit-Remaining"), integer("X-RateLimit-Reset")
	if limit != quota {
		t.Fatalf("%s: X-RateLimit-Limit %d, want the quota %d", where, limit, quota)
	}
	if remaining > quota {
		t.Fatalf("%s: X-RateLimit-Remaining %d over the quota %d", where, remaining, quota)
	}
	if reset < now.Unix() {
		t.Fatalf("%s: X-RateLimit-Reset %d is before now (%d)", where, reset, now.Unix())
	}

	policy := sfItem(t, where, hdr, "RateLimit-Policy")
	if q := sfParam(t, where, policy, "RateLimit-Policy", "q"); q != min(quota, maxSF) {
		t.Fatalf("%s: RateLimit-Policy q=%d, want %d", where, q, min(quota, maxSF))
	}
	if w := sfParam(t, where, policy, "RateLimit-Policy", "w"); w < 1 {
		t.Fatalf("%s: RateLimit-Policy w=%d, want at least 1", where, w)
	}
	cur := sfItem(t, where, hdr, "RateLimit")
	r, tSecs := sfParam(t, where, cur, "RateLimit", "r"), sfParam(t, where, cur, "RateLimit", "t")
	if r != min(remaining, maxSF) {
		t.Fatalf("%s: RateLimit r=%d but X-RateLimit-Remaining %d", where, r, remaining)
	}

	if w.Code == http.StatusTooManyRequests {
		retry := integer("Retry-After")
		if retry < 1 {
			t.Fatalf("%s: 429 with Retry-After %d, want at least 1", where, retry)
		}
		if tSecs != retry {
			t.Fatalf("%s: 429 with RateLimit t=%d but Retry-After %d", where, tSecs, retry)
		}
		wait, ok := rlclient.RetryWait(hdr, now)
		if !ok || wait < time.Duration(retry)*time.Second {
			t.Fatalf("%s: rlclient.RetryWait = %s, %v; want at least the Retry-After %d s", where, wait, ok, retry)
		}
		var body RejectedBody
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || body.RetryAfter != retry {
			t.Fatalf("%s: 429 body %q (%v): want retry_after %d", where, w.Body.Bytes(), err, retry)
		}
	} else {
		if v := hdr.Get("Retry-After"); v != "" {
			t.Fatalf("%s: 200 with Retry-After %q", where, v)
		}
		// t is the delta-seconds form of X-RateLimit-Reset (both rounded up).
		if d := reset - now.Unix(); d < tSecs || d > tSecs+1 {
			t.Fatalf("%s: RateLimit t=%d but X-RateLimit-Reset is %d s from now", where, tSecs, d)
		}
		if remaining < quota && tSecs < 1 {
			t.Fatalf("%s: %d of %d remaining, yet the quota is said to be whole again now (t=%d, X-RateLimit-Reset %d = now)", where, remaining, quota, tSecs, reset)
		}
	}
	if got, _, ok := rlclient.Quota(hdr, now); !ok || got != r {
		t.Fatalf("%s: rlclient.Quota = %d, %v; want the remaining %d", where, got, ok, r)
	}
	if legacy {
		if l, rem, rs := integer("RateLimit-Limit"), integer("RateLimit-Remaining"), integer("RateLimit-Reset"); l != quota || rem != remaining || rs != tSecs {
			t.Fatalf("%s: legacy RateLimit-Limit/-Remaining/-Reset %d/%d/%d, want %d/%d/%d", where, l, rem, rs, quota, remaining, tSecs)
		}
	} else if v := hdr.Get("RateLimit-Limit"); v != "" {
		t.Fatalf("%s: legacy RateLimit-Limit %q sent though not configured", where, v)
	}
}

// sfItem parses the header name as a Structured Field list of exactly one
// item, the policy named after the class "api".
func sfItem(t *testing.T, where string, hdr http.Header, name string) httpsfv.Item {
	t.Helper()
	vals := hdr.Values(name)
	list, err := httpsfv.UnmarshalList(vals)
	if err != nil {
		t.Fatalf("%s: %s %q is not a Structured Field list: %v", where, name, vals, err)
	}
	if len(list) != 1 {
		t.Fatalf("%s: %s %q has %d members, want 1", where, name, vals, len(list))
	}
	item, ok := list[0].(httpsfv.Item)
	if !ok || item.Value != "api" {
		t.Fatalf("%s: %s %q: want the string item \"api\"", where, name, vals)
	}
	return item
}

// sfParam returns the integer parameter key of item, which must be >= 0.
func sfParam(t *testing.T, where string, item httpsfv.Item, name, key string) int64 {
	t.Helper()
	v, ok := item.Params.Get(key)
	if !ok {
		t.Fatalf("%s: %s has no %s parameter", where, name, key)
	}
	n, ok := v.(int64)
	if !ok || n < 0 {
		t.Fatalf("%s: %s %s=%v, want an integer >= 0", where, name, key, v)
	}
	return n
}
