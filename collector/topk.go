package collector

import (
	"cmp"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// topShards splits the sketch so that concurrent rejections of different
// keys rarely wait on one another. Keys are partitioned by hash, so each
// key lives in exactly one shard and merging the shards is exact.
const topShards = 8

// maxTopKeyLen bounds the memory one tracked key may hold.
const maxTopKeyLen = 256

// topEntry is one monitored key of a space-saving sketch.
type topEntry struct {
	key            string
	count          uint64 // upper bound of the key's rejections in the window
	overestimate   uint64 // count - overestimate is a lower bound
	endpoint, tier string // where the key was last rejected
	pos            int    // index in the heap
}

// spaceSaving is the Space-Saving heavy-hitters sketch (Metwally, Agrawal
// and El Abbadi, 2005) with a fixed number of counters: a key not in the
// sketch replaces the smallest counter and inherits its count as its
// possible overestimate. Any key rejected more than total/capacity times
// is guaranteed to be present.
type spaceSaving struct {
	mu      sync.Mutex
	byKey   map[string]*topEntry
	heap    []*topEntry // min-heap on count
	entries []topEntry  // backing store, allocated once
	total   uint64
}

func newSpaceSaving(capacity int) *spaceSaving {
	return &spaceSaving{
		byKey:   make(map[string]*topEntry, capacity),
		heap:    make([]*topEntry, 0, capacity),
		entries: make([]topEntry, capacity),
	}
}

func (s *spaceSaving) add(key, endpoint, tier string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.total++
	if e, ok := s.byKey[key]; ok {
		e.count++
		e.endpoint, e.tier = endpoint, tier
		s.down(e.pos)
		return
	}
	// A new key is copied so that the sketch never pins the caller's buffer.
	if len(key) > maxTopKeyLen {
		key = key[:maxTopKeyLen]
		if e, ok := s.byKey[key]; ok {
			e.count++
			s.down(e.pos)
			return
		}
	}
	key = strings.Clone(key)
	if n := len(s.heap); n < len(s.entries) {
		e := &s.entries[n]
		*e = topEntry{key: key, count: 1, endpoint: endpoint, tier: tier, pos: n}
		s.heap = append(s.heap, e)
		s.byKey[key] = e
		s.up(n)
		return
	}
	e := s.heap[0]
	delete(s.byKey, e.key)
	e.key, e.overestimate, e.endpoint, e.tier = key, e.count, endpoint, tier
	e.count++
	s.byKey[key] = e
	s.down(0)
}

func (s *spaceSaving) less(i, j int) bool { return s.heap[i].count < s.heap[j].count }

func (s *spaceSaving) swap(i, j int) {
	s.heap[i], s.heap[j] = s.heap[j], s.heap[i]
	s.heap[i].pos, s.heap[j].pos = i, j
}

func (s *spaceSaving) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !s.less(i, p) {
			return
		}
		s.swap(i, p)
		i = p
	}
}

func (s *spaceSaving) down(i int) {
	n := len(s.heap)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && s.less(r, l) {
			m = r
		}
		if !s.less(m, i) {
			return
		}
		s.swap(i, m)
		i = m
	}
}

// topWindow is one window of the top-limited sketch.
type topWindow struct {
	start  int64 // nanoseconds since topK.base
	shards [topShards]*spaceSaving
}

func newTopWindow(start int64, perShard int) *topWindow {
	w := &topWindow{start: start}
	for i := range w.shards {
		w.shards[i] = newSpaceSaving(perShard)
	}
	return w
}

// topK keeps the most-rejected keys of the current and the previous window.
type topK struct {
	keys   int
	window int64 // nanoseconds
	base   time.Time
	clock  func() int64 // nanoseconds since base
	seed   maphash.Seed

	rotate sync.Mutex
	cur    atomic.Pointer[topWindow]
	prev   atomic.Pointer[topWindow]
}

func newTopK(keys int, window time.Duration, now func() time.Time) *topK {
	t := &topK{keys: keys, window: int64(window), seed: maphash.MakeSeed()}
	if now == nil {
		t.base = time.Now()
		t.clock = func() int64 { return int64(time.Since(t.base)) }
	} else {
		t.base = now()
		t.clock = func() int64 { return int64(now().Sub(t.base)) }
	}
	t.cur.Store(newTopWindow(0, keys))
	return t
}

// current returns the window that covers now, rotating when it is over.
func (t *topK) current(now int64) *topWindow {
	w := t.cur.Load()
	if now-w.start < t.window {
		return w
	}
	t.rotate.Lock()
	defer t.rotate.Unlock()
	w = t.cur.Load()
	elapsed := now - w.start
	if elapsed < t.window {
		return w
	}
	start := w.start + elapsed/t.window*t.window
	prev := w
	if elapsed >= 2*t.window {
		prev = newTopWindow(start-t.window, 0) // nothing was rejected then
	}
	next := newTopWindow(start, t.keys)
	t.prev.Store(prev)
	t.cur.Store(next)
	return next
}

func (t *topK) at(nanos int64) time.Time { return t.base.Add(time.Duration(nanos)).UTC().Round(0) }

func (t *topK) add(key, endpoint, tier string) {
	w := t.current(t.clock())
	w.shards[maphash.String(t.seed, key)%topShards].add(key, endpoint, tier)
}

// TopKey is one key of a TopLimited report.
type TopKey struct {
	// Key is the rate-limit key (truncated to 256 bytes).
	Key string `json:"key"`
	// Count is an upper bound of the key's rejections in the window.
	Count uint64 `json:"count"`
	// Overestimate bounds the error of Count: the key was rejected at least
	// Count-Overestimate times. Zero means Count is exact.
	Overestimate uint64 `json:"overestimate"`
	// Endpoint and PlanTier are the labels of the key's latest rejection.
	Endpoint string `json:"endpoint"`
	PlanTier string `json:"plan_tier"`
}

// TopWindow is the report of one window.
type TopWindow struct {
	// From and To bound the window covered (To is now for the current window).
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
	// Rejected counts every rejected, shadow-rejected or penalized decision with a key
	// in the window, tracked keys or not.
	Rejected uint64 `json:"rejected"`
	// Keys are the most-rejected keys, most first.
	Keys []TopKey `json:"keys"`
}

// TopLimited is what TopLimitedHandler serves.
type TopLimited struct {
	// Capacity is the most keys a window reports.
	Capacity int `json:"capacity"`
	// WindowSeconds is the length of one window.
	WindowSeconds float64 `json:"window_seconds"`
	// Current is the window in progress; Previous the one before it, if any.
	Current  TopWindow  `json:"current"`
	Previous *TopWindow `json:"previous,omitempty"`
}

func (t *topK) report(w *topWindow, to int64, n int) TopWindow {
	out := TopWindow{From: t.at(w.start), To: t.at(to), Keys: []TopKey{}}
	for _, s := range w.shards {
		s.mu.Lock()
		out.Rejected += s.total
		for _, e := range s.heap {
			out.Keys = append(out.Keys, TopKey{Key: e.key, Count: e.count, Overestimate: e.overestimate, Endpoint: e.endpoint, PlanTier: e.tier})
		}
		s.mu.Unlock()
	}
	slices.SortFunc(out.Keys, func(a, b TopKey) int {
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
	if len(out.Keys) > n {
		out.Keys = out.Keys[:n]
	}
	return out
}

// TopLimited reports the at most n most-rejected keys of the current and
// the previous window (n ≤ 0 or above Config.TopKeys means Config.TopKeys).
// Safe for concurrent use.
func (c *Collector) TopLimited(n int) TopLimited {
	t := c.top
	if n <= 0 || n > t.keys {
		n = t.keys
	}
	now := t.clock()
	cur := t.current(now)
	out := TopLimited{Capacity: t.keys, WindowSeconds: time.Duration(t.window).Seconds(), Current: t.report(cur, now, n)}
	if p := t.prev.Load(); p != nil {
		r := t.report(p, p.start+t.window, n)
		out.Previous = &r
	}
	return out
}

// TopLimitedHandler serves TopLimited as JSON; the query parameter n
// limits the number of keys per window. It shows users' keys: mount it on
// the admin listener only. Safe for concurrent use.
func (c *Collector) TopLimitedHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed: use GET", http.StatusMethodNotAllowed)
			return
		}
		n := 0
		if s := r.URL.Query().Get("n"); s != "" {
			v, err := strconv.Atoi(s)
			if err != nil || v < 1 {
				http.Error(w, fmt.Sprintf("query parameter n: want a positive integer, got %q", s), http.StatusBadRequest)
				return
			}
			n = v
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(c.TopLimited(n))
	})
}
