package rls_test

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	grpccodes "google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
	"github.com/rl-exporter/rl-exporter/rls"
)

// refusal sends req and returns its error's code and message; OK and ""
// when it was answered.
func (h *harness) refusal(t *testing.T, req *rlsv3.RateLimitRequest) (grpccodes.Code, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := h.client.ShouldRateLimit(ctx, req)
	st, _ := status.FromError(err)
	return st.Code(), st.Message()
}

func descs(n int, kv ...string) []*ratelimitv3.RateLimitDescriptor {
	out := make([]*ratelimitv3.RateLimitDescriptor, n)
	for i := range out {
		out[i] = desc(kv...)
	}
	return out
}

func TestARequestBeyondTheBoundsIsInvalidArgument(t *testing.T) {
	dir := writeDir(t, map[string]string{"suite.yaml": suiteConfig})
	h := start(t, limiter.NewMemoryStore(limiter.MemoryConfig{}), dir, nil)
	manyEntries := &ratelimitv3.RateLimitDescriptor{}
	for range 17 {
		manyEntries.Entries = append(manyEntries.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: "fixed", Value: "a"})
	}
	for _, c := range []struct {
		name string
		req  *rlsv3.RateLimitRequest
		want string
	}{
		{"2,000 descriptors", &rlsv3.RateLimitRequest{Domain: "suite", Descriptors: descs(2000, "fixed", "a")}, "descriptors: 2000, more than the 32 allowed (rls.max_descriptors)"},
		{"17 entries", &rlsv3.RateLimitRequest{Domain: "suite", Descriptors: []*ratelimitv3.RateLimitDescriptor{manyEntries}}, "descriptors[0].entries: 17, more than the 16 allowed (rls.max_entries)"},
		{"a 20 KB entry key", &rlsv3.RateLimitRequest{Domain: "suite", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("fixed", "a", strings.Repeat("k", 20<<10), "v")}}, "descriptors[0].entries[1].key: longer than 512 bytes"},
		{"a 20 KB domain", &rlsv3.RateLimitRequest{Domain: strings.Repeat("d", 20<<10), Descriptors: descs(1, "fixed", "a")}, "domain: longer than 512 bytes"},
	} {
		code, msg := h.refusal(t, c.req)
		if code != grpccodes.InvalidArgument || msg != c.want {
			t.Errorf("%s: %s %q, want InvalidArgument %q", c.name, code, msg, c.want)
		}
	}
	if got := h.call(t, "suite", 0, descs(32, "fixed", "b")...); len(got.Statuses) != 32 {
		t.Errorf("32 descriptors: %d statuses", len(got.Statuses))
	}
	if got := h.call(t, "suite", 0, desc("fixed", "c", strings.Repeat("k", 512), "v")); got.OverallCode != ok {
		t.Errorf("an entry key of 512 bytes: %v, want OK", got)
	}
	inv := h.svc.InvalidRequests()
	if inv[rls.InvalidTooManyDescriptors] != 1 || inv[rls.InvalidTooManyEntries] != 1 || inv[rls.InvalidTooLong] != 2 {
		t.Errorf("invalid requests %v, want 1 too_many_descriptors, 1 too_many_entries, 2 too_long", inv)
	}

	small := start(t, limiter.NewMemoryStore(limiter.MemoryConfig{}), dir, func(c *rls.Config) { c.MaxDescriptors, c.MaxEntries = 2, 1 })
	if code, msg := small.refusal(t, &rlsv3.RateLimitRequest{Domain: "suite", Descriptors: descs(3, "fixed", "a")}); code != grpccodes.InvalidArgument || !strings.Contains(msg, "more than the 2 allowed") {
		t.Errorf("3 descriptors under max_descriptors 2: %s %q", code, msg)
	}
	if code, msg := small.refusal(t, &rlsv3.RateLimitRequest{Domain: "suite", Descriptors: descs(1, "plan", "pro", "user", "u")}); code != grpccodes.InvalidArgument || !strings.Contains(msg, "more than the 1 allowed") {
		t.Errorf("2 entries under max_entries 1: %s %q", code, msg)
	}
}

// TestALongDescriptorValueIsKeyedByItsHash checks, on a private Redis,
// that a client's 20 KB value is limited like any other, apart from
// another long value, and that no key Redis holds is long.
func TestALongDescriptorValueIsKeyedByItsHash(t *testing.T) {
	srv := redistest.Single(t)
	dir := writeDir(t, map[string]string{"suite.yaml": suiteConfig})
	h := start(t, redisStore(t, redisstore.ClientConfig{URL: srv.URL()}), dir, nil)
	a := strings.Repeat("a", 20<<10)
	b := a[:len(a)-1] + "b"
	if n := admitted(t, h, "suite", desc("client", a), 4); n != 2 {
		t.Errorf("a 20 KB value admitted %d times, want its limit 2", n)
	}
	if n := admitted(t, h, "suite", desc("client", b), 4); n != 2 {
		t.Errorf("another 20 KB value admitted %d times, want a limit of its own, 2", n)
	}
	keys, err := srv.Do("KEYS", "*")
	if err != nil {
		t.Fatal(err)
	}
	list, _ := keys.([]any)
	if len(list) < 2 {
		t.Fatalf("Redis holds %v, want the two values' keys", keys)
	}
	for _, k := range list {
		if s, _ := k.(string); len(s) > 600 {
			t.Errorf("Redis holds a key of %d bytes, want at most 600", len(s))
		}
	}
}

func TestAnEvictedLimitOverrideKeepsItsCounts(t *testing.T) {
	dir := writeDir(t, map[string]string{"suite.yaml": suiteConfig})
	h := start(t, limiter.NewMemoryStore(limiter.MemoryConfig{}), dir, func(c *rls.Config) { c.MaxOverrides = 1 })
	withLimit := func(key string) *ratelimitv3.RateLimitDescriptor {
		d := desc(key, "o")
		d.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 2, Unit: typev3.RateLimitUnit_DAY}
		return d
	}
	var got []rlsv3.RateLimitResponse_Code
	for range 3 {
		for _, key := range []string{"fixed", "client"} {
			got = append(got, h.call(t, "suite", 0, withLimit(key)).OverallCode)
		}
	}
	want := []rlsv3.RateLimitResponse_Code{ok, ok, ok, ok, over, over}
	if !slices.Equal(got, want) {
		t.Errorf("two overrides of 2 a day, each evicting the other: %v, want %v", got, want)
	}
}

// lockedBuffer is a log sink safe for concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) lines(substr string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range strings.Split(l.b.String(), "\n") {
		if strings.Contains(line, substr) {
			out = append(out, line)
		}
	}
	return out
}

func TestACostAboveTheQuotaIsCountedAndLoggedOncePerInterval(t *testing.T) {
	dir := writeDir(t, map[string]string{"suite.yaml": suiteConfig})
	var logs lockedBuffer
	var now atomic.Int64
	now.Store(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	h := start(t, limiter.NewMemoryStore(limiter.MemoryConfig{}), dir, func(c *rls.Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		c.LogInterval = time.Minute
		c.Now = func() time.Time { return time.Unix(0, now.Load()) }
	})
	const requests, perRequest = 20, 5
	for range requests {
		// fixed admits 3 a day: a cost of 10 never fits.
		resp := h.call(t, "suite", 0, withHits(desc("fixed", "a"), 10), withHits(desc("fixed", "b"), 10),
			withHits(desc("fixed", "c"), 10), withHits(desc("fixed", "d"), 10), withHits(desc("fixed", "e"), 10))
		if resp.OverallCode != over {
			t.Fatalf("costs above the limit: %v, want OVER_LIMIT", resp)
		}
	}
	if got := logs.lines("cannot be admitted"); len(got) != 1 {
		t.Errorf("%d log lines for %d descriptors over %d requests within the interval, want 1:\n%s", len(got), requests*perRequest, requests, strings.Join(got, "\n"))
	}
	if n := h.svc.InvalidRequests()[rls.InvalidCostExceedsLimit]; n != requests {
		t.Errorf("cost_exceeds_limit counted %d, want one per request, %d", n, requests)
	}
	now.Add(int64(time.Minute))
	h.call(t, "suite", 0, withHits(desc("fixed", "a"), 10))
	got := logs.lines("cannot be admitted")
	if len(got) != 2 || !strings.Contains(got[1], "occurrences=100") {
		t.Errorf("after the interval: %q, want a second line summing the %d occurrences since the first", got, requests*perRequest)
	}
}
