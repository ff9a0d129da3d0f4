package redisstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/limiter"
)

// testClock reads the clock from the last two ARGV (seconds,
// microseconds) instead of TIME, so a test can run a script at chosen
// instants.
const testClock = "{ARGV[#ARGV - 1], ARGV[#ARGV]}"

// scriptsAt returns algorithm a's single and batch scripts with their
// clock read from the last two ARGV (seconds, microseconds) instead of
// TIME, after checking that nothing else differs from the production
// scripts and that those read the clock once per call.
func scriptsAt(t *testing.T, a limiter.Algorithm) (single, batch *redis.Script) {
	t.Helper()
	single1, batch1, err := scriptSources(limiter.SpecOf(a), testClock)
	if err != nil {
		t.Fatal(err)
	}
	single2, batch2, err := scriptSources(limiter.SpecOf(a), redisClock)
	if err != nil {
		t.Fatal(err)
	}
	for _, pair := range [][2]string{{single1, single2}, {batch1, batch2}} {
		if strings.Replace(pair[0], testClock, redisClock, 1) != pair[1] {
			t.Fatalf("%s: the script at chosen instants is not the production one", a)
		}
		if n := strings.Count(pair[1], redisClock); n != 1 {
			t.Fatalf("%s: the script calls TIME %d times, want once per call", a, n)
		}
	}
	return redis.NewScript(single1), redis.NewScript(batch1)
}

// singleStore returns a private redis-server and a Store on it.
func singleStore(t *testing.T) (*redistest.Server, *Store) {
	t.Helper()
	srv := redistest.Single(t)
	return srv, NewTestStore(t, ClientConfig{URL: srv.URL()}, Config{})
}

// instants is the clock of a test that runs the scripts (with testClock)
// and the memory store at the same chosen instants. The scripts still set
// their real expiry, so the instants advance at least as fast as real
// time: a key that expires in Redis has then also become equivalent to a
// fresh key on the chosen clock.
type instants struct {
	start, now int64 // µs since the Unix epoch
	lastReal   time.Time
}

func newInstants() *instants {
	const start = 1_750_000_000_123_457 // a realistic Unix time
	return &instants{start: start, now: start, lastReal: time.Now()}
}

// advance moves the clock forward by gap µs, or by the real time since
// the last advance and a millisecond when that is more.
func (c *instants) advance(gap int64) {
	c.now += max(gap, int64(time.Since(c.lastReal)/time.Microsecond)+1000)
	c.lastReal = time.Now()
}

// memoryStore is a memory store on this clock.
func (c *instants) memoryStore() *limiter.MemoryStore {
	return limiter.NewMemoryStore(limiter.MemoryConfig{Now: func() time.Time { return time.UnixMicro(c.now) }})
}

// clockArgs are the last two ARGV of a script at the current instant.
func (c *instants) clockArgs() []any { return []any{c.now / 1_000_000, c.now % 1_000_000} }

// elapsed is the time since the start, in µs, for messages.
func (c *instants) elapsed() int64 { return c.now - c.start }

// requireCached fails the test unless Redis holds the script of sha.
func requireCached(t *testing.T, srv *redistest.Server, sha, what string) {
	t.Helper()
	r, err := srv.Do("SCRIPT", "EXISTS", sha)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := r.([]any); !ok || len(got) != 1 || got[0] != int64(1) {
		t.Fatalf("SCRIPT EXISTS of the %s = %v: not cached again", what, r)
	}
}

// TestScriptsMatchTheMemoryStore runs each script on a real Redis at
// chosen instants and the memory store at the same instants on its
// controllable clock, in every mode (consume, peek, at most) at random,
// and requires identical decisions: both stores implement one definition,
// to the microsecond.
//
// The scripts still set their real expiry, so the instants advance at
// least as fast as real time: a key that expires in Redis has then also
// become equivalent to a fresh key on the chosen clock.
func TestScriptsMatchTheMemoryStore(t *testing.T) {
	_, store := singleStore(t)
	limits := map[limiter.Algorithm][]limiter.Limit{}
	for _, a := range limiter.AllAlgorithms() {
		limits[a] = []limiter.Limit{
			{Algorithm: a, Rate: 5, Period: time.Second},
			{Algorithm: a, Rate: 7, Period: 3 * time.Second, Burst: 4},
			{Algorithm: a, Rate: 3, Period: 1700 * time.Millisecond, Burst: 9, AlignWindows: true},
			{Algorithm: a, Rate: 20, Period: time.Minute, Burst: 12},
		}
	}
	limits[limiter.LeakyBucket] = append(limits[limiter.LeakyBucket],
		limiter.Limit{Algorithm: limiter.LeakyBucket, Rate: 2, Period: time.Second, Burst: 5, NoDelay: true})

	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	modes := []limiter.Mode{limiter.ModeConsume, limiter.ModePeek, limiter.ModeAtMost}
	for _, a := range limiter.AllAlgorithms() {
		script, _ := scriptsAt(t, a)
		for li, lim := range limits[a] {
			t.Run(fmt.Sprintf("%s limit %d", a, li), func(t *testing.T) {
				key := fmt.Sprintf("diff:%s:%d:{ü}", a, li)
				clock := newInstants()
				mem := clock.memoryStore()
				period := int64(lim.Period / time.Microsecond)
				var allowed, rejected int
				seen := map[limiter.Mode]int{}
				for step := 0; step < 150; step++ {
					// Mostly short gaps (bursts), sometimes a fraction of the
					// period, now and then longer than a window.
					var gap int64
					switch r := rng.IntN(20); {
					case r < 10:
						gap = rng.Int64N(3)
					case r < 19:
						gap = rng.Int64N(2 * period / lim.Rate)
					default:
						gap = rng.Int64N(3 * period)
					}
					clock.advance(gap)
					cost := 1 + rng.Int64N(min(lim.Quota(), 4))
					mode := modes[rng.IntN(len(modes))]

					want, err := mem.DecideMode(ctx, key, lim, cost, mode, 0)
					if err != nil {
						t.Fatal(err)
					}
					args := append(scriptArgs(key, lim, cost, mode), clock.clockArgs()...)
					reply, err := script.Run(ctx, store.client, store.Keys(key, a), args...).Result()
					if err != nil {
						t.Fatalf("step %d: script: %v", step, err)
					}
					r := &request{limit: lim.Quota(), cost: cost, mode: mode}
					got, err := r.answer(decodeReply(reply))
					if err != nil {
						t.Fatalf("step %d: %v", step, err)
					}
					if got != want {
						t.Fatalf("step %d at +%dµs, cost %d, mode %s:\nredis  %+v\nmemory %+v", step, clock.elapsed(), cost, mode, got, want)
					}
					seen[mode]++
					if got.Allowed {
						allowed++
					} else {
						rejected++
					}
				}
				// The sequence must exercise both branches of the script, in
				// every mode.
				for _, m := range modes {
					if seen[m] < 20 {
						t.Fatalf("mode %s ran %d times of 150", m, seen[m])
					}
				}
				if allowed < 10 || rejected < 10 {
					t.Fatalf("%d allowed and %d rejected: the sequence does not exercise both branches", allowed, rejected)
				}
			})
		}
	}
}

func TestDecodeReplyRejectsUnexpectedShapes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reply any
	}{
		{"a string instead of an array", "OK"},
		{"an array of four", []any{int64(1), int64(2), int64(3), int64(4)}},
		{"a string element", []any{int64(1), "2", int64(3), int64(4), int64(0)}},
		{"a float element", []any{int64(1), 2.5, int64(3), int64(4), int64(0)}},
		{"a negative duration", []any{int64(1), int64(2), int64(-3), int64(4), int64(0)}},
		{"a negative count of units admitted", []any{int64(-1), int64(2), int64(3), int64(4), int64(0)}},
		{"nil", nil},
	} {
		t.Run(tc.name+" is an error, not a panic", func(t *testing.T) {
			if d, err := decodeReply(tc.reply); err == nil {
				t.Fatalf("decodeReply(%v) = %+v, nil; want an error", tc.reply, d)
			}
		})
	}
	d, err := decodeReply([]any{int64(1), int64(2), int64(3000), int64(0), int64(5)})
	if err != nil || !d.Allowed || d.Remaining != 2 || d.ResetAfter != 3*time.Millisecond || d.Delay != 5*time.Microsecond {
		t.Fatalf("decodeReply of a good reply = %+v, %v", d, err)
	}
}

func TestKeysCarryOneHashTagAndNeverCollide(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = client.Close() })
	s, err := New(client, Config{Prefix: "app"})
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{
		"user:42":   "app:{user:42}:gcra",
		"{a}":       "app:{%7Ba%7D}:gcra",
		"%7Ba%7D":   "app:{%257Ba%257D}:gcra",
		"":          "app:{%00}:gcra",
		"%00":       "app:{%2500}:gcra",
		"ключ{}":    "app:{ключ%7B%7D}:gcra",
		"}{":        "app:{%7D%7B}:gcra",
		"a}:gcra:x": "app:{a%7D:gcra:x}:gcra",
	} {
		if got := s.Keys(key, limiter.GCRA)[0]; got != want {
			t.Errorf("key %q: %q, want %q", key, got, want)
		}
	}
	if got := s.Keys("k", limiter.SlidingLog); len(got) != 2 || got[1] != "app:{k}:sliding_log:seq" {
		t.Errorf("sliding_log keys = %q", got)
	}
	seen := map[string]string{}
	for _, key := range []string{"", "%", "%00", "%25", "{", "}", "{}", "%7B", "%7D", "%7B%7D", "a", "{a}", "a:b", "a:{b}", "a}", "{a"} {
		k := s.Keys(key, limiter.FixedWindow)[0]
		if prev, dup := seen[k]; dup {
			t.Errorf("keys %q and %q both map to %q", prev, key, k)
		}
		seen[k] = key
		// Exactly one '{' and one '}': the hash tag is the escaped key.
		if strings.Count(k, "{") != 1 || strings.Count(k, "}") != 1 {
			t.Errorf("key %q maps to %q with more than one brace pair", key, k)
		}
	}
	if _, err := New(client, Config{Prefix: "a{b}"}); err == nil {
		t.Fatalf("New accepted a prefix with braces")
	}
}

func TestScriptArgsAreIntegers(t *testing.T) {
	// go-redis writes int64 arguments with strconv: no fmt on the decision path.
	for _, a := range limiter.AllAlgorithms() {
		for _, v := range scriptArgs("k", limiter.PerSecond(a, 10), 1, limiter.ModeConsume) {
			if _, ok := v.(int64); !ok {
				t.Fatalf("%s: argument %v is a %T, want int64", a, v, v)
			}
		}
	}
	off := scriptArgs("k", limiter.PerMinute(limiter.FixedWindow, 10), 1, limiter.ModeConsume)[2].(int64)
	if want := int64(limiter.WindowOffset("k", time.Minute) / time.Microsecond); off != want {
		t.Fatalf("window offset argument = %d, want %d", off, want)
	}
	aligned := limiter.PerMinute(limiter.FixedWindow, 10)
	aligned.AlignWindows = true
	if off := scriptArgs("k", aligned, 1, limiter.ModeConsume)[2].(int64); off != 0 {
		t.Fatalf("aligned window offset argument = %d, want 0", off)
	}
}

// Every command a script sends names a key from KEYS (or is TIME): no
// script builds a key name, which Redis Cluster would refuse.
func TestScriptsTouchOnlyDeclaredKeys(t *testing.T) {
	call := regexp.MustCompile(`redis\.call\('([A-Z]+)'(?:,\s*([^,)]+))?`)
	for _, a := range limiter.AllAlgorithms() {
		src, err := luaFiles.ReadFile("lua/" + string(a) + ".lua")
		if err != nil {
			t.Fatal(err)
		}
		calls := call.FindAllStringSubmatch(string(src), -1)
		if len(calls) < 2 {
			t.Fatalf("%s.lua: found %d redis.call, the pattern no longer matches the scripts", a, len(calls))
		}
		for _, c := range calls {
			if c[1] == "TIME" {
				continue
			}
			if !regexp.MustCompile(`^KEYS\[\d\]$`).MatchString(strings.TrimSpace(c[2])) {
				t.Errorf("%s.lua: %s on %q, want a key from KEYS", a, c[1], c[2])
			}
		}
		if n := strings.Count(string(src), "redis.call("); n != len(calls) {
			t.Errorf("%s.lua: %d redis.call, %d checked", a, n, len(calls))
		}
	}
}

// After SCRIPT FLUSH (a restart, a failover to a replica without the
// script) EVALSHA answers NOSCRIPT and the store sends the script again.
func TestDecisionsSurviveAFlushedScriptCache(t *testing.T) {
	srv, store := singleStore(t)
	ctx := context.Background()
	lim := limiter.PerMinute(limiter.GCRA, 10)
	for i := 0; i < 3; i++ {
		if _, err := srv.Do("SCRIPT", "FLUSH"); err != nil {
			t.Fatal(err)
		}
		d, err := store.Decide(ctx, "flushed", lim, 1)
		if err != nil || !d.Allowed || d.Remaining != int64(9-i) {
			t.Fatalf("decision %d after SCRIPT FLUSH: %+v, %v", i+1, d, err)
		}
	}
	requireCached(t, srv, store.scriptsOf(limiter.GCRA).single.sha, "gcra script")
}

// Each script reads the parameters limiter's table gives its algorithm,
// in the table's order: the table drives the arguments, the script's
// locals say what it takes them for.
func TestScriptsReadTheParametersOfTheTableInItsOrder(t *testing.T) {
	local := regexp.MustCompile(`(?m)^local (\w+) = tonumber\(ARGV\[(\d+)\]\)`)
	names := map[string]limiter.Param{
		"rate": limiter.ParamRate, "burst": limiter.ParamQuota, "period": limiter.ParamPeriod,
		"offset": limiter.ParamWindowOffset, "nodelay": limiter.ParamNoDelay,
		"cprev": limiter.ParamCalendarPrev, "cstart": limiter.ParamCalendarStart,
		"cnext": limiter.ParamCalendarNext, "cafter": limiter.ParamCalendarAfter,
	}
	for _, spec := range limiter.AlgorithmSpecs() {
		src, err := luaFiles.ReadFile("lua/" + string(spec.Algorithm()) + ".lua")
		if err != nil {
			t.Fatal(err)
		}
		var got []limiter.Param
		for i, m := range local.FindAllStringSubmatch(string(src), -1) {
			p, ok := names[m[1]]
			if !ok || m[2] != strconv.Itoa(i+1) {
				t.Fatalf("%s.lua: local %s = ARGV[%s], want the parameters in order, named %v", spec, m[1], m[2], names)
			}
			got = append(got, p)
		}
		if want := spec.Params(); !slices.Equal(got, want) {
			t.Errorf("%s.lua reads %v, the table gives %v", spec, got, want)
		}
	}
}
