package collector

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// fakeClock is a controllable clock for the top-limited windows.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeClock) Advance(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	f.mu.Unlock()
}

func reject(c *Collector, key string) {
	r := rec("/v1/search", "free", limiter.StatusRejected)
	r.Key = key
	c.RecordDecision(context.Background(), r)
}

func TestTopLimitedFindsTheHeavyHittersInALongTail(t *testing.T) {
	clock := &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)}
	c := newTestCollector(t, Config{Endpoints: []string{"/v1/search"}, Tiers: []string{"free"}, TopKeys: 10, Now: clock.Now})
	heavy := map[string]int{"abuser-1": 5000, "abuser-2": 3000, "abuser-3": 2000, "scraper": 1000}
	var stream []string
	for k, n := range heavy {
		for range n {
			stream = append(stream, k)
		}
	}
	const tail = 20_000 // distinct keys, rejected once each
	for i := range tail {
		stream = append(stream, fmt.Sprintf("tail-%d", i))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	rng.Shuffle(len(stream), func(i, j int) { stream[i], stream[j] = stream[j], stream[i] })
	for _, k := range stream {
		reject(c, k)
	}
	// Shadow rejections and refusals from the penalty box count too; allowed decisions do not.
	r := rec("/v1/search", "free", limiter.StatusShadowRejected)
	r.Key = "scraper"
	c.RecordDecision(context.Background(), r)
	r = rec("/v1/search", "free", limiter.StatusPenalized)
	r.Key = "scraper"
	c.RecordDecision(context.Background(), r)
	r = rec("/v1/search", "free", limiter.StatusAllowed)
	r.Key = "abuser-1"
	c.RecordDecision(context.Background(), r)
	heavy["scraper"] += 2

	top := c.TopLimited(4)
	if top.Current.Rejected != uint64(len(stream)+2) {
		t.Errorf("rejected = %d, want %d", top.Current.Rejected, len(stream)+2)
	}
	if len(top.Current.Keys) != 4 {
		t.Fatalf("%d keys, want 4: %+v", len(top.Current.Keys), top.Current.Keys)
	}
	for i, want := range []string{"abuser-1", "abuser-2", "abuser-3", "scraper"} {
		k := top.Current.Keys[i]
		if k.Key != want {
			t.Errorf("rank %d = %s, want %s", i+1, k.Key, want)
			continue
		}
		truth := uint64(heavy[want])
		if k.Count < truth || k.Count-k.Overestimate > truth {
			t.Errorf("%s: count %d (overestimate %d) does not bound the true %d", want, k.Count, k.Overestimate, truth)
		}
		if k.Endpoint != "/v1/search" || k.PlanTier != "free" {
			t.Errorf("%s: labels %s/%s, want /v1/search/free", want, k.Endpoint, k.PlanTier)
		}
	}
	var tracked int
	for _, s := range c.top.cur.Load().shards {
		tracked += len(s.heap)
	}
	if tracked > topShards*10 {
		t.Errorf("%d keys tracked, want at most %d (fixed memory)", tracked, topShards*10)
	}
}

func TestTopLimitedWindowsRotate(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	clock := &fakeClock{now: start}
	c := newTestCollector(t, Config{Endpoints: []string{"/v1/search"}, TopWindow: time.Minute, Now: clock.Now})
	reject(c, "early")
	reject(c, "early")
	clock.Advance(90 * time.Second)
	reject(c, "late")

	top := c.TopLimited(0)
	if top.WindowSeconds != 60 || top.Capacity != DefaultTopKeys {
		t.Errorf("window %vs capacity %d, want 60s and %d", top.WindowSeconds, top.Capacity, DefaultTopKeys)
	}
	if !top.Current.From.Equal(start.Add(time.Minute)) || !top.Current.To.Equal(start.Add(90*time.Second)) {
		t.Errorf("current window %s–%s, want %s–%s", top.Current.From, top.Current.To, start.Add(time.Minute), start.Add(90*time.Second))
	}
	if len(top.Current.Keys) != 1 || top.Current.Keys[0].Key != "late" {
		t.Errorf("current keys = %+v, want late only", top.Current.Keys)
	}
	if top.Previous == nil || len(top.Previous.Keys) != 1 || top.Previous.Keys[0].Key != "early" || top.Previous.Keys[0].Count != 2 {
		t.Fatalf("previous window = %+v, want early ×2", top.Previous)
	}
	if !top.Previous.From.Equal(start) || !top.Previous.To.Equal(start.Add(time.Minute)) {
		t.Errorf("previous window %s–%s, want %s–%s", top.Previous.From, top.Previous.To, start, start.Add(time.Minute))
	}

	// After a quiet spell longer than two windows, both windows are empty.
	clock.Advance(5 * time.Minute)
	top = c.TopLimited(0)
	if len(top.Current.Keys) != 0 || top.Previous == nil || len(top.Previous.Keys) != 0 {
		t.Errorf("after 5 quiet minutes: current %+v previous %+v, want both empty", top.Current.Keys, top.Previous)
	}
	if want := start.Add(6 * time.Minute); !top.Current.From.Equal(want) {
		t.Errorf("current window from %s, want %s (aligned to the first window)", top.Current.From, want)
	}
}

func TestTopLimitedHandler(t *testing.T) {
	c := newTestCollector(t, Config{Endpoints: []string{"/v1/search"}})
	for i := range 5 {
		for range i + 1 {
			reject(c, fmt.Sprintf("key-%d", i))
		}
	}
	cases := []struct {
		name, method, query string
		code                int
		keys                int
		body                string
	}{
		{"GET lists every tracked key", http.MethodGet, "", 200, 5, ""},
		{"n limits the keys", http.MethodGet, "?n=2", 200, 2, ""},
		{"a bad n is a 400 naming the parameter", http.MethodGet, "?n=-1", 400, 0, "query parameter n"},
		{"POST is not allowed", http.MethodPost, "", 405, 0, "use GET"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			c.TopLimitedHandler().ServeHTTP(w, httptest.NewRequest(tc.method, "/debug/top-limited"+tc.query, nil))
			if w.Code != tc.code {
				t.Fatalf("status %d, want %d: %s", w.Code, tc.code, w.Body)
			}
			if tc.code != 200 {
				if !strings.Contains(w.Body.String(), tc.body) {
					t.Errorf("body %q, want it to mention %q", w.Body, tc.body)
				}
				return
			}
			if ct := w.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			var got struct {
				WindowSeconds float64 `json:"window_seconds"`
				Current       struct {
					From, To string
					Rejected uint64
					Keys     []struct {
						Key   string
						Count uint64
					}
				}
			}
			if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
				t.Fatalf("decode %s: %v", w.Body, err)
			}
			if len(got.Current.Keys) != tc.keys || got.Current.Keys[0].Key != "key-4" || got.Current.Keys[0].Count != 5 {
				t.Errorf("keys = %+v, want %d keys led by key-4 ×5", got.Current.Keys, tc.keys)
			}
			if got.Current.Rejected != 15 || got.WindowSeconds != DefaultTopWindow.Seconds() || got.Current.From == "" || got.Current.To == "" {
				t.Errorf("window = %+v (%vs), want 15 rejected and its bounds", got.Current, got.WindowSeconds)
			}
		})
	}
}

func TestTopLimitedKeepsLongKeysBounded(t *testing.T) {
	c := newTestCollector(t, Config{})
	long := strings.Repeat("k", 10_000)
	reject(c, long)
	reject(c, long)
	keys := c.TopLimited(0).Current.Keys
	if len(keys) != 1 || len(keys[0].Key) != maxTopKeyLen || keys[0].Count != 2 {
		t.Errorf("got %d keys, first of %d bytes ×%d; want one key of %d bytes ×2", len(keys), len(keys[0].Key), keys[0].Count, maxTopKeyLen)
	}
}
