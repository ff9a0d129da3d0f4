package httplimit

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dunglas/httpsfv"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// rateLimitField parses a RateLimit or RateLimit-Policy field into its one
// item's policy name and parameters.
func rateLimitField(t *testing.T, v string) (string, map[string]int64) {
	t.Helper()
	l, err := httpsfv.UnmarshalList([]string{v})
	if err != nil || len(l) != 1 {
		t.Fatalf("field %q is not a one-item structured list: %v", v, err)
	}
	it, ok := l[0].(httpsfv.Item)
	if !ok {
		t.Fatalf("field %q: member is not an item", v)
	}
	name, ok := it.Value.(string)
	if !ok {
		t.Fatalf("field %q: policy name is not a string", v)
	}
	params := map[string]int64{}
	for _, k := range it.Params.Names() {
		pv, _ := it.Params.Get(k)
		n, ok := pv.(int64)
		if !ok {
			t.Fatalf("field %q: parameter %s is not an integer", v, k)
		}
		params[k] = n
	}
	return name, params
}

func TestFiveAllowedCountDownThenA429WithTheSecondsLeftInTheWindow(t *testing.T) {
	clk := newClock()
	clk.Advance(17*time.Second + 300*time.Millisecond) // somewhere inside a window
	_, h, rec := setup(t, PolicyConfig{Classes: []Class{oneClass("default", limiter.PerMinute(limiter.FixedWindow, 5))}}, clk)

	for i := 1; i <= 5; i++ {
		w := do(h, "GET", "/anything", "192.0.2.1:5000", nil)
		if w.Code != http.StatusOK {
			t.Fatalf("request %d: status %d, want 200", i, w.Code)
		}
		want := strconv.Itoa(5 - i)
		if got := w.Header().Get("X-RateLimit-Remaining"); got != want {
			t.Errorf("request %d: X-RateLimit-Remaining %q, want %q", i, got, want)
		}
		if got := w.Header().Get("X-RateLimit-Limit"); got != "5" {
			t.Errorf("request %d: X-RateLimit-Limit %q, want 5", i, got)
		}
		name, rl := rateLimitField(t, w.Header().Get("RateLimit"))
		if name != "default" || rl["r"] != int64(5-i) {
			t.Errorf("request %d: RateLimit %q, want policy default with r=%d", i, w.Header().Get("RateLimit"), 5-i)
		}
		_, pol := rateLimitField(t, w.Header().Get("RateLimit-Policy"))
		if pol["q"] != 5 || pol["w"] != 60 {
			t.Errorf("request %d: RateLimit-Policy %q, want q=5;w=60", i, w.Header().Get("RateLimit-Policy"))
		}
		clk.Advance(time.Second)
	}

	// The window of this key starts at its stable offset; the seconds left
	// are computed here from the window geometry, not read from the limiter.
	key := rec.all()[0].Key
	now := clk.Now()
	off := limiter.WindowOffset(key, time.Minute)
	sinceStart := (now.Sub(time.Unix(0, 0)) - off) % time.Minute
	left := time.Minute - sinceStart
	wantRetry := strconv.FormatInt(int64((left+time.Second-1)/time.Second), 10)

	w := do(h, "GET", "/anything", "192.0.2.1:5000", nil)
	if w.Code != http.StatusTooManyRequests {
		t.Fatalf("request 6: status %d, want 429", w.Code)
	}
	if got := w.Header().Get("Retry-After"); got != wantRetry {
		t.Errorf("request 6: Retry-After %q, want %q (seconds left in the window)", got, wantRetry)
	}
	if got := w.Header().Get("Cache-Control"); got != "no-store" {
		t.Errorf("request 6: Cache-Control %q, want no-store", got)
	}
	if got := w.Header().Get("Content-Type"); got != "application/json" {
		t.Errorf("request 6: Content-Type %q, want application/json", got)
	}
	var body RejectedBody
	decodeJSON(t, w.Body.Bytes(), &body)
	if body.Error != "rate_limit_exceeded" || body.Message == "" || strconv.FormatInt(body.RetryAfter, 10) != wantRetry {
		t.Errorf("request 6: body %+v, want error rate_limit_exceeded, a message and retry_after %s", body, wantRetry)
	}
	_, rl := rateLimitField(t, w.Header().Get("RateLimit"))
	if ra, _ := strconv.ParseInt(w.Header().Get("Retry-After"), 10, 64); rl["t"] > ra || rl["r"] != 0 {
		t.Errorf("request 6: RateLimit %q: want r=0 and t <= Retry-After %d", w.Header().Get("RateLimit"), ra)
	}
	statuses := []limiter.Status{}
	for _, r := range rec.all() {
		statuses = append(statuses, r.Status)
	}
	if fmt.Sprint(statuses) != "[allowed allowed allowed allowed allowed rejected]" {
		t.Errorf("recorded statuses %v, want five allowed then one rejected, once per request", statuses)
	}
}

func TestAThousandOrderPathsCountAgainstOneEndpoint(t *testing.T) {
	clk := newClock()
	_, h, rec := setup(t, PolicyConfig{Classes: []Class{
		oneClass("default", limiter.PerMinute(limiter.FixedWindow, 100000)),
		oneClass("orders", limiter.PerMinute(limiter.FixedWindow, 1000), "GET /orders/{id}"),
	}}, clk)
	for i := 0; i < 1000; i++ {
		if w := do(h, "GET", fmt.Sprintf("/orders/%d", i), "192.0.2.1:1", nil); w.Code != 200 {
			t.Fatalf("order %d: status %d, want 200", i, w.Code)
		}
	}
	w := do(h, "GET", "/orders/another-one", "192.0.2.1:1", nil)
	if w.Code != http.StatusTooManyRequests {
		t.Fatalf("the 1001st distinct order path: status %d, want 429: all share one budget", w.Code)
	}
	endpoints := map[string]int{}
	for _, r := range rec.all() {
		endpoints[r.Endpoint]++
	}
	if len(endpoints) != 1 || endpoints["GET /orders/{id}"] != 1001 {
		t.Errorf("recorded endpoints %v, want only GET /orders/{id} ×1001", endpoints)
	}
}

func TestClassesAndEndpointsNeverShareState(t *testing.T) {
	clk := newClock()
	lim := limiter.PerMinute(limiter.FixedWindow, 1)
	_, h, _ := setup(t, PolicyConfig{Classes: []Class{
		oneClass("default", lim),
		oneClass("public", lim, "GET /a", "GET /b"),
		{Name: "admin", Routes: []string{"/admin/"}, Shared: true, Limits: map[string]limiter.Limit{"default": lim}},
	}}, clk)
	for _, path := range []string{"/a", "/b", "/elsewhere", "/admin/x"} {
		if w := do(h, "GET", path, "192.0.2.1:1", nil); w.Code != 200 {
			t.Errorf("first request to %s: status %d, want 200 (own budget)", path, w.Code)
		}
	}
	if w := do(h, "GET", "/a", "192.0.2.1:1", nil); w.Code != 429 {
		t.Errorf("second request to /a: status %d, want 429", w.Code)
	}
	if w := do(h, "GET", "/admin/y", "192.0.2.1:1", nil); w.Code != 429 {
		t.Errorf("a shared class: /admin/y after /admin/x: status %d, want 429", w.Code)
	}
	if w := do(h, "GET", "/a", "192.0.2.2:1", nil); w.Code != 200 {
		t.Errorf("another client on /a: status %d, want 200", w.Code)
	}
}

func TestTiersGetTheirOwnLimitAndUnknownTiersTheDefault(t *testing.T) {
	clk := newClock()
	_, h, rec := setup(t, PolicyConfig{
		Tiers: []string{"free", "pro"}, DefaultTier: "free",
		Classes: []Class{{Name: "api", Limits: map[string]limiter.Limit{
			"free": limiter.PerMinute(limiter.FixedWindow, 2),
			"pro":  limiter.PerMinute(limiter.FixedWindow, 10),
		}}},
		Identity: IdentityConfig{UserHeader: "X-User-ID", TierHeader: "X-Plan-Tier", TrustedHeaderPeers: testGateway, TierByKey: map[string]string{"carol": "pro"}},
	}, clk)
	cases := []struct {
		name      string
		hdr       map[string]string
		wantLimit string
		wantTier  string
	}{
		{"a pro tier header gets the pro limit", map[string]string{"X-User-ID": "alice", "X-Plan-Tier": "pro"}, "10", "pro"},
		{"no tier gets the default tier", map[string]string{"X-User-ID": "bob"}, "2", "free"},
		{"an unknown tier gets the default tier", map[string]string{"X-User-ID": "dan", "X-Plan-Tier": "platinum"}, "2", "free"},
		{"the key to tier lookup applies without a header", map[string]string{"X-User-ID": "carol"}, "10", "pro"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := do(h, "GET", "/x", "192.0.2.1:1", c.hdr)
			if got := w.Header().Get("X-RateLimit-Limit"); got != c.wantLimit {
				t.Errorf("X-RateLimit-Limit %q, want %s", got, c.wantLimit)
			}
			all := rec.all()
			if got := all[len(all)-1].PlanTier; got != c.wantTier {
				t.Errorf("recorded tier %q, want %q", got, c.wantTier)
			}
		})
	}
}

func TestHeaderFamiliesSwitchOnAndOff(t *testing.T) {
	families := map[string][]string{
		"x":      {"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"},
		"draft":  {"RateLimit-Policy", "RateLimit"},
		"legacy": {"RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"},
	}
	cases := []struct {
		name string
		cfg  HeaderConfig
		want map[string]bool
	}{
		{"the defaults send X-RateLimit and the draft fields", HeaderConfig{}, map[string]bool{"x": true, "draft": true}},
		{"legacy on adds the trio", HeaderConfig{Legacy: true}, map[string]bool{"x": true, "draft": true, "legacy": true}},
		{"X-RateLimit off leaves the draft fields", HeaderConfig{OmitXRateLimit: true}, map[string]bool{"draft": true}},
		{"the draft off leaves X-RateLimit", HeaderConfig{OmitRateLimit: true}, map[string]bool{"x": true}},
		{"all off sends none", HeaderConfig{OmitXRateLimit: true, OmitRateLimit: true}, map[string]bool{}},
		{"only legacy", HeaderConfig{OmitXRateLimit: true, OmitRateLimit: true, Legacy: true}, map[string]bool{"legacy": true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clk := newClock()
			_, h, _ := setup(t, PolicyConfig{Headers: c.cfg, Classes: []Class{oneClass("default", limiter.PerMinute(limiter.FixedWindow, 1))}}, clk)
			for _, code := range []int{200, 429} {
				w := do(h, "GET", "/", "192.0.2.1:1", nil)
				if w.Code != code {
					t.Fatalf("status %d, want %d", w.Code, code)
				}
				for fam, names := range families {
					for _, n := range names {
						if present := w.Header().Get(n) != ""; present != c.want[fam] {
							t.Errorf("status %d: header %s present=%v, want %v", code, n, present, c.want[fam])
						}
					}
				}
				if code == 429 && w.Header().Get("Retry-After") == "" {
					t.Errorf("429 without Retry-After")
				}
			}
		})
	}
}

// TestTheNumbersOfEachAlgorithmAreAsDocumented checks the table of the
// README: 10 requests per 10 s for the window algorithms; rate 10 per 10 s
// with burst 5 for the bucket algorithms.
func TestTheNumbersOfEachAlgorithmAreAsDocumented(t *testing.T) {
	type nums struct{ limit, remaining, reset, q, w, r, t, retry int64 }
	cases := []struct {
		alg            limiter.Algorithm
		first, refused nums // first request; first refused request
		allowed        int
	}{
		{limiter.FixedWindow, nums{10, 9, 10, 10, 10, 9, 10, 0}, nums{10, 0, 10, 10, 10, 0, 10, 10}, 10},
		{limiter.SlidingLog, nums{10, 9, 10, 10, 10, 9, 10, 0}, nums{10, 0, 10, 10, 10, 0, 10, 10}, 10},
		{limiter.SlidingWindow, nums{10, 9, 20, 10, 10, 9, 20, 0}, nums{10, 0, 20, 10, 10, 0, 11, 11}, 10},
		{limiter.TokenBucket, nums{5, 4, 1, 5, 5, 4, 1, 0}, nums{5, 0, 5, 5, 5, 0, 1, 1}, 5},
		{limiter.LeakyBucket, nums{5, 4, 1, 5, 5, 4, 1, 0}, nums{5, 0, 5, 5, 5, 0, 1, 1}, 5},
		{limiter.GCRA, nums{5, 4, 1, 5, 5, 4, 1, 0}, nums{5, 0, 5, 5, 5, 0, 1, 1}, 5},
	}
	for _, c := range cases {
		t.Run(string(c.alg), func(t *testing.T) {
			clk := newClock()
			lim := limiter.Limit{Algorithm: c.alg, Rate: 10, Period: 10 * time.Second, Burst: 5, AlignWindows: true, NoDelay: true}
			_, h, _ := setup(t, PolicyConfig{Classes: []Class{oneClass("default", lim)}}, clk)
			read := func(w *httptestRecorder) nums {
				var n nums
				n.limit, _ = strconv.ParseInt(w.Header().Get("X-RateLimit-Limit"), 10, 64)
				n.remaining, _ = strconv.ParseInt(w.Header().Get("X-RateLimit-Remaining"), 10, 64)
				resetAt, _ := strconv.ParseInt(w.Header().Get("X-RateLimit-Reset"), 10, 64)
				n.reset = resetAt - clk.Now().Unix()
				_, pol := rateLimitField(t, w.Header().Get("RateLimit-Policy"))
				_, rl := rateLimitField(t, w.Header().Get("RateLimit"))
				n.q, n.w, n.r, n.t = pol["q"], pol["w"], rl["r"], rl["t"]
				n.retry, _ = strconv.ParseInt(w.Header().Get("Retry-After"), 10, 64)
				return n
			}
			first := read(do(h, "GET", "/", "192.0.2.1:1", nil))
			if first != c.first {
				t.Errorf("first request: %+v, want %+v", first, c.first)
			}
			for i := 2; i <= c.allowed; i++ {
				if w := do(h, "GET", "/", "192.0.2.1:1", nil); w.Code != 200 {
					t.Fatalf("request %d: status %d, want 200", i, w.Code)
				}
			}
			w := do(h, "GET", "/", "192.0.2.1:1", nil)
			if w.Code != 429 {
				t.Fatalf("request %d: status %d, want 429", c.allowed+1, w.Code)
			}
			if got := read(w); got != c.refused {
				t.Errorf("first refused request: %+v, want %+v", got, c.refused)
			}
		})
	}
}

func TestProblemJSONNamesTheQuotaExceededTypeAndTheViolatedPolicy(t *testing.T) {
	clk := newClock()
	_, h, _ := setup(t, PolicyConfig{Headers: HeaderConfig{ProblemJSON: true}, Classes: []Class{oneClass("public", limiter.PerMinute(limiter.FixedWindow, 1))}}, clk)
	do(h, "GET", "/", "192.0.2.1:1", nil)
	w := do(h, "GET", "/", "192.0.2.1:1", nil)
	if w.Code != 429 || w.Header().Get("Content-Type") != "application/problem+json" {
		t.Fatalf("status %d, Content-Type %q; want 429 application/problem+json", w.Code, w.Header().Get("Content-Type"))
	}
	var p map[string]any
	decodeJSON(t, w.Body.Bytes(), &p)
	if p["type"] != QuotaExceededType || p["status"] != float64(429) || p["title"] == "" || p["detail"] == "" {
		t.Errorf("problem %v: want type %s, status 429, a title and a detail", p, QuotaExceededType)
	}
	if vp, _ := p["violated-policies"].([]any); len(vp) != 1 || vp[0] != "public" {
		t.Errorf("violated-policies %v, want [public]", p["violated-policies"])
	}
	if w.Header().Get("Retry-After") == "" || w.Header().Get("Cache-Control") != "no-store" {
		t.Errorf("headers %v: want Retry-After and Cache-Control: no-store", w.Header())
	}
}

// failingStore fails every decision, as a Redis that is down would.
type failingStore struct{}

func (failingStore) Decide(context.Context, string, limiter.Limit, int64) (limiter.Decision, error) {
	return limiter.Decision{}, errors.New("connection refused")
}
func (failingStore) Name() string { return "failing" }

func TestAFailedStoreFailsOpenOrClosedAsConfigured(t *testing.T) {
	cases := []struct {
		name       string
		policy     limiter.FailPolicy
		shadow     bool
		wantCode   int
		wantStatus limiter.Status
	}{
		{"fail-open passes the request and records fail_open", limiter.FailOpen, false, 200, limiter.StatusFailOpen},
		{"fail-closed answers 503, not 429, and records fail_closed", limiter.FailClosed, false, 503, limiter.StatusFailClosed},
		{"a shadow class passes even when fail-closed", limiter.FailClosed, true, 200, limiter.StatusFailOpen},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cl := oneClass("default", limiter.PerMinute(limiter.FixedWindow, 5))
			cl.Shadow = c.shadow
			_, h, rec := setup(t, PolicyConfig{Store: failingStore{}, FailPolicy: c.policy, Classes: []Class{cl}}, newClock())
			w := do(h, "GET", "/", "192.0.2.1:1", nil)
			if w.Code != c.wantCode {
				t.Fatalf("status %d, want %d", w.Code, c.wantCode)
			}
			if c.wantCode == 503 {
				if ra := w.Header().Get("Retry-After"); ra == "" || ra == "0" {
					t.Errorf("503 Retry-After %q, want whole seconds > 0", ra)
				}
			}
			if w.Header().Get("X-RateLimit-Remaining") != "" {
				t.Errorf("a decision the store did not make carries X-RateLimit-Remaining %q", w.Header().Get("X-RateLimit-Remaining"))
			}
			recs := rec.all()
			if len(recs) != 1 || recs[0].Status != c.wantStatus || recs[0].Err == nil {
				t.Errorf("records %+v, want one %s with the store error", recs, c.wantStatus)
			}
		})
	}
}

func TestShadowClassesLetEverythingThroughAndRecordShadowRejected(t *testing.T) {
	cl := oneClass("default", limiter.PerMinute(limiter.FixedWindow, 1))
	cl.Shadow = true
	_, h, rec := setup(t, PolicyConfig{Classes: []Class{cl}}, newClock())
	for i := 0; i < 3; i++ {
		if w := do(h, "GET", "/", "192.0.2.1:1", nil); w.Code != 200 {
			t.Fatalf("request %d: status %d, want 200 in shadow mode", i+1, w.Code)
		}
	}
	got := []limiter.Status{}
	for _, r := range rec.all() {
		got = append(got, r.Status)
	}
	if fmt.Sprint(got) != "[allowed shadow_rejected shadow_rejected]" {
		t.Errorf("recorded %v, want allowed then shadow_rejected twice", got)
	}
}

func TestLeakyBucketDelayHoldsTheRequestBoundedByItsContext(t *testing.T) {
	lim := limiter.Limit{Algorithm: limiter.LeakyBucket, Rate: 5, Period: time.Second, Burst: 3} // 200ms per request
	_, h, _ := setup(t, PolicyConfig{Store: limiter.NewMemoryStore(limiter.MemoryConfig{}), Classes: []Class{oneClass("default", lim)}}, newClock())
	do(h, "GET", "/", "192.0.2.1:1", nil) // empties the queue slot now
	start := time.Now()
	w := do(h, "GET", "/", "192.0.2.1:1", nil)
	held := time.Since(start)
	if w.Code != 200 {
		t.Fatalf("status %d, want 200", w.Code)
	}
	if !raceEnabled && (held < 100*time.Millisecond || held > 2*time.Second) {
		t.Errorf("second request held %s, want about 200ms", held)
	}

	// A request whose context ends while held is not passed on.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	r := newRequest("GET", "/", "192.0.2.1:1").WithContext(ctx)
	passed := false
	next := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { passed = true })
	p, _ := NewPolicy(PolicyConfig{Store: limiter.NewMemoryStore(limiter.MemoryConfig{}), Classes: []Class{oneClass("default", lim)}})
	m, _ := New(Config{Policy: p})
	hh := m.Handler(next)
	hh.ServeHTTP(newRecorder(), newRequest("GET", "/", "192.0.2.1:1"))
	passed = false
	hh.ServeHTTP(newRecorder(), r)
	if passed {
		t.Errorf("a request whose context ended while held was passed on")
	}
}

func TestSwapIsAtomicUnderConcurrentRequests(t *testing.T) {
	clk := newClock()
	store := limiter.NewMemoryStore(limiter.MemoryConfig{Now: clk.Now})
	mk := func(n int64) *Policy {
		p, err := NewPolicy(PolicyConfig{Store: store, Classes: []Class{oneClass("default", limiter.PerMinute(limiter.FixedWindow, n))}})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	var seen sync.Map
	m, _ := New(Config{Policy: mk(1000), OnPolicy: func(p *Policy) { seen.Store(p.Limits()[0].Limit.Rate, true) }})
	h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				w := do(h, "GET", "/", fmt.Sprintf("192.0.2.%d:1", g), nil)
				if l := w.Header().Get("X-RateLimit-Limit"); l != "1000" && l != "2000" {
					t.Errorf("X-RateLimit-Limit %q, want 1000 or 2000", l)
					return
				}
			}
		}(g)
	}
	for i := 0; i < 50; i++ {
		m.Swap(mk(int64(1000 * (1 + i%2))))
	}
	wg.Wait()
	if _, ok := seen.Load(int64(2000)); !ok {
		t.Errorf("OnPolicy was not told of the swapped-in policy")
	}
	if w := do(h, "GET", "/", "192.0.2.9:1", nil); w.Header().Get("X-RateLimit-Limit") != "2000" {
		t.Errorf("after the last swap X-RateLimit-Limit %q, want 2000", w.Header().Get("X-RateLimit-Limit"))
	}
}

func TestInvalidPoliciesAreRefusedWithTheirReason(t *testing.T) {
	store := limiter.NewMemoryStore(limiter.MemoryConfig{})
	ok := limiter.PerMinute(limiter.FixedWindow, 5)
	cases := []struct {
		name string
		cfg  PolicyConfig
		want string
	}{
		{"a malformed route", PolicyConfig{Classes: []Class{oneClass("a", ok, "GET orders")}}, `route "GET orders"`},
		{"two classes claiming one route", PolicyConfig{Classes: []Class{oneClass("a", ok, "/x"), oneClass("b", ok, "/x")}}, `class "b": route "/x"`},
		{"a zero rate", PolicyConfig{Classes: []Class{oneClass("a", limiter.PerMinute(limiter.FixedWindow, 0))}}, "rate"},
		{"a limit for an unknown tier", PolicyConfig{Classes: []Class{{Name: "a", Limits: map[string]limiter.Limit{"default": ok, "gold": ok}}}}, `unknown tier "gold"`},
		{"no limit for the default tier", PolicyConfig{Tiers: []string{"free", "pro"}, DefaultTier: "free", Classes: []Class{{Name: "a", Limits: map[string]limiter.Limit{"pro": ok}}}}, `default tier "free"`},
		{"an unknown default class", PolicyConfig{DefaultClass: "zzz", Classes: []Class{oneClass("a", ok)}}, `"zzz"`},
		{"a class name with a separator", PolicyConfig{Classes: []Class{oneClass("a|b", ok)}}, `class "a|b"`},
		{"a JWT algorithm outside the list", PolicyConfig{Identity: IdentityConfig{JWT: &JWTConfig{Algorithm: "none"}}}, "unsupported algorithm"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.cfg.Store = store
			_, err := NewPolicy(c.cfg)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one mentioning %s", err, c.want)
			}
		})
	}
}
