package region_test

import (
	"context"
	"fmt"
	poll "github.com/rl-exporter/rl-exporter/internal/eventually"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
	"github.com/rl-exporter/rl-exporter/region"
)

// counting is an Observer that counts what it is told.
type counting struct {
	local, remote atomic.Int64
	syncs, errs   atomic.Int64
	rtts          atomic.Int64
	rejected      atomic.Int64
	mu            sync.Mutex
	lag           map[string]time.Duration
}

func (c *counting) ObserveSync(peer string, lag time.Duration, err error) {
	c.syncs.Add(1)
	if err != nil {
		c.errs.Add(1)
	}
	c.mu.Lock()
	if c.lag == nil {
		c.lag = map[string]time.Duration{}
	}
	c.lag[peer] = lag
	c.mu.Unlock()
}

func (c *counting) ObserveDecision(_ region.Mode, home string) {
	if home == region.HomeRemote {
		c.remote.Add(1)
	} else {
		c.local.Add(1)
	}
}

func (c *counting) ObserveRTT(string, time.Duration) { c.rtts.Add(1) }

func (c *counting) ObserveRejectedSlots(_ string, n int) { c.rejected.Add(int64(n)) }

func (c *counting) lastLag(peer string) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lag[peer]
}

// world is regions, each with its own redis-server, and the Set of each
// region's process: its own Redis directly, every peer's through a Link
// with the one-way latency between regions.
type world struct {
	names   []string
	servers map[string]*redistest.Server
	direct  map[string]redis.UniversalClient
	links   map[[2]string]*redistest.Link // [from, to]
	sets    map[string]*region.Set
	obs     map[string]*counting
}

type worldConfig struct {
	regions      []string
	oneWay       time.Duration
	syncInterval time.Duration
	syncTimeout  time.Duration
}

func newClient(t testing.TB, url string) redis.UniversalClient {
	t.Helper()
	c, err := redisstore.ClientConfig{URL: url}.NewClient()
	if err != nil {
		t.Fatalf("client for %s: %v", url, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func newWorld(t testing.TB, cfg worldConfig) *world {
	t.Helper()
	w := &world{
		names: slices.Sorted(slices.Values(cfg.regions)), servers: map[string]*redistest.Server{},
		direct: map[string]redis.UniversalClient{}, links: map[[2]string]*redistest.Link{},
		sets: map[string]*region.Set{}, obs: map[string]*counting{},
	}
	for _, n := range w.names {
		w.servers[n] = redistest.Single(t)
	}
	for _, from := range w.names {
		for _, to := range w.names {
			if from != to {
				l := redistest.Relay(t, w.servers[to].Addr())
				l.SetLatency(cfg.oneWay)
				w.links[[2]string{from, to}] = l
			}
		}
	}
	for _, n := range w.names {
		clients := map[string]redis.UniversalClient{}
		for _, to := range w.names {
			if to == n {
				clients[to] = newClient(t, w.servers[to].URL())
				w.direct[to] = clients[to]
			} else {
				clients[to] = newClient(t, w.links[[2]string{n, to}].URL())
			}
		}
		w.obs[n] = &counting{}
		set, err := region.New(region.Config{
			Local: n, Clients: clients, SyncInterval: cfg.syncInterval, SyncTimeout: cfg.syncTimeout, Observer: w.obs[n],
		})
		if err != nil {
			t.Fatalf("region.New(%s): %v", n, err)
		}
		set.Start()
		t.Cleanup(func() { _ = set.Close() })
		w.sets[n] = set
	}
	return w
}

// limiters returns one Limiter per region enforcing lim in mode m.
func (w *world) limiters(t testing.TB, m region.Mode, opt region.StoreOptions, lim limiter.Limit) map[string]*limiter.Limiter {
	t.Helper()
	out := map[string]*limiter.Limiter{}
	for _, n := range w.names {
		st, err := w.sets[n].Store(m, opt)
		if err != nil {
			t.Fatalf("Store(%s) in %s: %v", m, n, err)
		}
		l, err := limiter.New(limiter.Config{Limit: lim, Store: st, Timeout: 5 * time.Second, FailPolicy: limiter.FailClosed})
		if err != nil {
			t.Fatalf("limiter in %s: %v", n, err)
		}
		out[n] = l
	}
	return out
}

func (w *world) remoteShare() float64 {
	var local, remote int64
	for _, o := range w.obs {
		local += o.local.Load()
		remote += o.remote.Load()
	}
	if local+remote == 0 {
		return 0
	}
	return float64(remote) / float64(local+remote)
}

// run is what one region's traffic got.
type run struct {
	admitted, decisions, errors int64
	latencies                   []time.Duration
}

// drive sends rate requests per second for key to l, open loop (each
// request on its own goroutine at its time, whatever the previous ones
// are doing), for d, and returns once every request has its answer.
func drive(l *limiter.Limiter, key string, rate float64, d time.Duration) *run {
	r := &run{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	interval := time.Duration(float64(time.Second) / rate)
	start := time.Now()
	for i := 0; ; i++ {
		at := start.Add(time.Duration(i) * interval)
		if at.Sub(start) >= d {
			break
		}
		time.Sleep(time.Until(at)) // not synchronisation: the request's turn at this rate
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			dec, err := l.Allow(context.Background(), key)
			took := time.Since(t0)
			mu.Lock()
			defer mu.Unlock()
			r.decisions++
			r.latencies = append(r.latencies, took)
			if err != nil {
				r.errors++
				return
			}
			if dec.Allowed {
				r.admitted++
			}
		}()
	}
	wg.Wait()
	return r
}

// driveAll drives every region's limiter at once and returns the runs by
// region.
func driveAll(ls map[string]*limiter.Limiter, key string, rate float64, d time.Duration) map[string]*run {
	out := map[string]*run{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for n, l := range ls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := drive(l, key, rate, d)
			mu.Lock()
			out[n] = r
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

func p99(runs map[string]*run) time.Duration {
	var all []time.Duration
	for _, r := range runs {
		all = append(all, r.latencies...)
	}
	if len(all) == 0 {
		return 0
	}
	slices.Sort(all)
	return all[(len(all)*99+99)/100-1]
}

// keyWithRoom returns a key whose fixed window (of period) has at least
// room left from now, so that a test's traffic stays in one window.
func keyWithRoom(t testing.TB, base string, period, room time.Duration) string {
	t.Helper()
	for i := range 1000 {
		k := fmt.Sprintf("%s-%d", base, i)
		off := limiter.WindowOffset(k, period)
		pos := time.Duration((time.Now().UnixMicro()-off.Microseconds())%period.Microseconds()) * time.Microsecond
		if pos < 0 {
			pos += period
		}
		if period-pos > room && pos > time.Second {
			return k
		}
	}
	t.Fatalf("no key with %s left in its window of %s", room, period)
	return ""
}

// hashKey is the multi-region hash of key under algorithm a with the
// default prefix.
func hashKey(key string, a limiter.Algorithm) string {
	return "rl:{" + key + "}:" + string(a) + ":regions"
}

// keyStartingSoon returns a key whose fixed window (of period) starts
// between 0.3 s and 1.5 s from now, and when.
func keyStartingSoon(t testing.TB, base string, period time.Duration) (string, time.Time) {
	t.Helper()
	for i := range 100000 {
		k := fmt.Sprintf("%s-%d", base, i)
		now := time.Now()
		off := limiter.WindowOffset(k, period)
		pos := time.Duration((now.UnixMicro()-off.Microseconds())%period.Microseconds()) * time.Microsecond
		if pos < 0 {
			pos += period
		}
		if left := period - pos; left > 300*time.Millisecond && left < 1500*time.Millisecond {
			return k, now.Add(left)
		}
	}
	t.Fatalf("no key whose window of %s starts within 1.5 s", period)
	return "", time.Time{}
}

// eventually fails the test with what's message unless cond holds within.
func eventually(t testing.TB, within time.Duration, what func() string, cond func() bool) {
	t.Helper()
	if !poll.Within(within, cond) {
		t.Fatal(what())
	}
}
