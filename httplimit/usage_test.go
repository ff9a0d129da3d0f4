package httplimit

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

func getUsage(h http.Handler, query string) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", UsagePath+query, nil))
	return w
}

func usagePolicy(store limiter.Store) PolicyConfig {
	return PolicyConfig{
		Store: store,
		Tiers: []string{"free", "pro"}, DefaultTier: "free",
		Classes: []Class{
			{Name: "default", Limits: map[string]limiter.Limit{"free": limiter.PerMinute(limiter.FixedWindow, 100)}},
			{Name: "orders", Routes: []string{"GET /orders/{id}"}, Limits: map[string]limiter.Limit{
				"free": {Algorithm: limiter.FixedWindow, Rate: 10, Period: time.Minute, AlignWindows: true},
				"pro":  limiter.PerMinute(limiter.FixedWindow, 50)}},
			{Name: "search", Shared: true, Routes: []string{"GET /search", "GET /find"}, Limits: map[string]limiter.Limit{
				"free": limiter.PerMinute(limiter.TokenBucket, 20)}},
		},
		Identity: IdentityConfig{TierByKey: map[string]string{"bob": "pro"}},
	}
}

func findUsage(t *testing.T, r UsageReport, class, endpoint string) UsageLimit {
	t.Helper()
	for _, l := range r.Limits {
		if l.Class == class && l.Endpoint == endpoint {
			return l
		}
	}
	t.Fatalf("no usage for class %s endpoint %s in %+v", class, endpoint, r.Limits)
	return UsageLimit{}
}

func TestUsageAnswersEveryLimitOfAKeyWithAForecast(t *testing.T) {
	clk := newClock()
	store := limiter.NewMemoryStore(limiter.MemoryConfig{Now: clk.Now})
	m, h, _ := setup(t, usagePolicy(store), clk)
	clk.Advance(40 * time.Second) // to a minute's start, where orders' aligned window begins
	for range 3 {
		do(h, "GET", "/orders/1", "10.0.0.1:1", nil)
	}
	clk.Advance(15 * time.Second)
	for range 3 {
		do(h, "GET", "/orders/2", "10.0.0.1:1", nil)
	}
	do(h, "GET", "/search", "10.0.0.1:1", nil)
	do(h, "GET", "/find", "10.0.0.1:1", nil)

	w := getUsage(m.UsageHandler(), "?key=ip:10.0.0.1")
	if w.Code != 200 {
		t.Fatalf("status %d, want 200: %s", w.Code, w.Body)
	}
	var r UsageReport
	decodeJSON(t, w.Body.Bytes(), &r)
	if r.Key != "ip:10.0.0.1" || r.PlanTier != "free" {
		t.Errorf("key %q tier %q, want ip:10.0.0.1 on free", r.Key, r.PlanTier)
	}
	// One budget per endpoint of orders, one shared by search's routes, one for the default class.
	if len(r.Limits) != 3 {
		t.Errorf("%d limits, want 3 (orders, search, default): %+v", len(r.Limits), r.Limits)
	}
	o := findUsage(t, r, "orders", "GET /orders/{id}")
	now := clk.Now()
	if o.Quota != 10 || o.Used != 6 || o.Remaining != 4 || o.Algorithm != limiter.FixedWindow {
		t.Errorf("orders: %+v, want quota 10, used 6, remaining 4 on fixed_window", o)
	}
	if want := now.Add(45 * time.Second); !o.Reset.Equal(want) || o.ResetSeconds != 45 {
		t.Errorf("orders reset %v (%d s), want %v (45 s)", o.Reset, o.ResetSeconds, want)
	}
	// 6 used in 15 s: 0.4 a second, so the 4 left last 10 s, before the reset.
	if o.ExhaustedAt == nil || !o.ExhaustedAt.Equal(now.Add(10*time.Second)) {
		t.Errorf("orders exhausted_at %v, want %v", o.ExhaustedAt, now.Add(10*time.Second))
	}
	if o.OpenReservations != 0 {
		t.Errorf("orders open reservations %d, want 0", o.OpenReservations)
	}
	s := findUsage(t, r, "search", "*")
	if s.Quota != 20 || s.Used != 2 || s.Remaining != 18 || s.ExhaustedAt != nil {
		t.Errorf("search: %+v, want quota 20, used 2 of the shared bucket, no forecast", s)
	}
	d := findUsage(t, r, "default", CatchAll)
	if d.Used != 0 || d.Remaining != 100 || d.ExhaustedAt != nil {
		t.Errorf("default: %+v, want unused: 100 remaining, no forecast", d)
	}
	if strings.Contains(w.Body.String(), `"reset":"`) == false || !strings.Contains(w.Body.String(), `"exhausted_at":null`) {
		t.Errorf("body %s: want reset as RFC 3339 and exhausted_at null where none", w.Body)
	}
}

func TestUsageTakesTheKeysTierOrTheOneAskedFor(t *testing.T) {
	clk := newClock()
	m, _, _ := setup(t, usagePolicy(nil), clk)
	for _, tc := range []struct{ query, tier string }{
		{"?key=bob", "pro"}, {"?key=user:bob", "pro"}, {"?key=carol", "free"}, {"?key=carol&plan_tier=pro", "pro"},
	} {
		w := getUsage(m.UsageHandler(), tc.query)
		var r UsageReport
		decodeJSON(t, w.Body.Bytes(), &r)
		if r.PlanTier != tc.tier {
			t.Errorf("%s: tier %q, want %q", tc.query, r.PlanTier, tc.tier)
		}
		if o := findUsage(t, r, "orders", "GET /orders/{id}"); tc.tier == "pro" && o.Quota != 50 {
			t.Errorf("%s: orders quota %d, want pro's 50", tc.query, o.Quota)
		}
	}
}

func TestReadingUsageChangesNothing(t *testing.T) {
	clk := newClock()
	store := limiter.NewMemoryStore(limiter.MemoryConfig{Now: clk.Now})
	m, h, _ := setup(t, usagePolicy(store), clk)
	do(h, "GET", "/orders/1", "10.0.0.1:1", nil)
	keys := store.Len()
	var first UsageReport
	for i := range 5 {
		w := getUsage(m.UsageHandler(), "?key=ip:10.0.0.1")
		var r UsageReport
		decodeJSON(t, w.Body.Bytes(), &r)
		if i == 0 {
			first = r
			continue
		}
		if o, f := findUsage(t, r, "orders", "GET /orders/{id}"), findUsage(t, first, "orders", "GET /orders/{id}"); o.Used != f.Used || o.Remaining != f.Remaining {
			t.Errorf("read %d: orders %+v, first read %+v: reading changed the budget", i+1, o, f)
		}
	}
	getUsage(m.UsageHandler(), "?key=somebody-new")
	if n := store.Len(); n != keys {
		t.Errorf("memory store has %d keys after reading usage, %d before: a read created state", n, keys)
	}
	w := postCheck(m.CheckHandler(), "", `{"key":"ip:10.0.0.1","endpoint":"GET /orders/3"}`)
	var c CheckResponse
	decodeJSON(t, w.Body.Bytes(), &c)
	if c.Remaining != 8 {
		t.Errorf("check after the reads: remaining %d, want 8 (10 − the 2 requests made)", c.Remaining)
	}
}

func TestUsageRefusesBadInput(t *testing.T) {
	clk := newClock()
	m, _, _ := setup(t, usagePolicy(nil), clk)
	for _, tc := range []struct {
		method, query string
		code          int
		says          string
	}{
		{"GET", "", 400, "key: required"},
		{"GET", "?key=" + strings.Repeat("k", MaxCheckKey+1), 400, "key: longer"},
		{"GET", "?key=a&plan_tier=gold", 400, "plan_tier: unknown tier \"gold\""},
		{"GET", "?key=a&color=red", 400, "unknown query parameter \"color\""},
		{"POST", "?key=a", 400, "in the body, never in the URL"},
		{"DELETE", "?key=a", 405, "use GET"},
	} {
		w := httptest.NewRecorder()
		m.UsageHandler().ServeHTTP(w, httptest.NewRequest(tc.method, UsagePath+tc.query, nil))
		var body RejectedBody
		decodeJSON(t, w.Body.Bytes(), &body)
		if w.Code != tc.code || !strings.Contains(body.Message, tc.says) {
			t.Errorf("%s %s: %d %s, want %d saying %q", tc.method, tc.query, w.Code, w.Body, tc.code, tc.says)
		}
	}
}

// downInspector is an Inspector that fails every call.
type downInspector struct{}

func (downInspector) Name() string { return "failing" }
func (downInspector) Decide(context.Context, string, limiter.Limit, int64) (limiter.Decision, error) {
	return limiter.Decision{}, context.DeadlineExceeded
}
func (downInspector) DecideMode(context.Context, string, limiter.Limit, int64, limiter.Mode, time.Duration) (limiter.Decision, error) {
	return limiter.Decision{}, context.DeadlineExceeded
}
func (downInspector) Reset(context.Context, string, limiter.Limit, time.Duration) error {
	return context.DeadlineExceeded
}

func TestUsageSaysWhenTheStoreCannotBeRead(t *testing.T) {
	clk := newClock()
	m, _, _ := setup(t, usagePolicy(downInspector{}), clk)
	w := getUsage(m.UsageHandler(), "?key=a")
	if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "store_unavailable") {
		t.Errorf("status %d %s, want 503 store_unavailable: a fail-open guess is no reading", w.Code, w.Body)
	}
}

// A calendar month is as long as the month holding now, not its longest:
// half the quota used in February's first 7 days runs out on the 15th.
func TestUsageForecastsACalendarMonthByItsOwnLength(t *testing.T) {
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		t.Fatal(err)
	}
	lim := limiter.PerCalendar(1000, &limiter.Calendar{Unit: limiter.Month, Location: tokyo})
	now := time.Date(2027, 2, 8, 0, 0, 0, 0, tokyo)
	start, end := lim.Calendar.Window(now)
	if !start.Equal(time.Date(2027, 2, 1, 0, 0, 0, 0, tokyo)) {
		t.Fatalf("window starts %s, want February 1st in Tokyo", start)
	}
	at := forecast(lim, 500, 500, end.Sub(now), now)
	want := time.Date(2027, 2, 15, 0, 0, 0, 0, tokyo)
	if at == nil || !at.Equal(want) {
		t.Fatalf("exhausted at %v, want %s", at, want)
	}
}
