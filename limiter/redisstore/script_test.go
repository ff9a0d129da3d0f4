package redisstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"regexp"
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

// scriptAt returns algorithm a's script with its clock read from the last
// two ARGV (seconds, microseconds) instead of TIME, and nothing else
// changed.
func scriptAt(t *testing.T, a limiter.Algorithm) *redis.Script {
	t.Helper()
	src, _, err := scriptSources(a, testClock)
	if err != nil {
		t.Fatal(err)
	}
	prod, _, err := scriptSources(a, redisClock)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Replace(src, testClock, redisClock, 1) != prod {
		t.Fatalf("%s: the script at chosen instants is not the production one", a)
	}
	if n := strings.Count(prod, "redis.call('TIME')"); n != 1 {
		t.Fatalf("%s: the script calls TIME %d times, want once", a, n)
	}
	return redis.NewScript(src)
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
	srv := redistest.Single(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = client.Close() })
	store, err := New(client, Config{})
	if err != nil {
		t.Fatal(err)
	}
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
		script := scriptAt(t, a)
		for li, lim := range limits[a] {
			t.Run(fmt.Sprintf("%s limit %d", a, li), func(t *testing.T) {
				key := fmt.Sprintf("diff:%s:%d:{ü}", a, li)
				var now int64 = 1_750_000_000_123_457 // µs, a realistic Unix time
				clock := now
				mem := limiter.NewMemoryStore(limiter.MemoryConfig{Now: func() time.Time { return time.UnixMicro(clock) }})
				period := int64(lim.Period / time.Microsecond)
				lastReal := time.Now()
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
					real := int64(time.Since(lastReal)/time.Microsecond) + 1000
					now += max(gap, real)
					lastReal = time.Now()
					cost := 1 + rng.Int64N(min(lim.Quota(), 4))

					mode := modes[rng.IntN(len(modes))]

					clock = now
					want, err := mem.DecideMode(ctx, key, lim, cost, mode, 0)
					if err != nil {
						t.Fatal(err)
					}
					args := append(scriptArgs(key, lim, cost, mode), now/1_000_000, now%1_000_000)
					reply, err := script.Run(ctx, client, store.Keys(key, a), args...).Result()
					if err != nil {
						t.Fatalf("step %d: script: %v", step, err)
					}
					r := &request{limit: lim.Quota(), cost: cost, mode: mode}
					got, err := r.answer(decodeReply(reply))
					if err != nil {
						t.Fatalf("step %d: %v", step, err)
					}
					if got != want {
						t.Fatalf("step %d at +%dµs, cost %d, mode %s:\nredis  %+v\nmemory %+v", step, now-1_750_000_000_123_457, cost, mode, got, want)
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
	srv := redistest.Single(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = client.Close() })
	store, err := New(client, Config{})
	if err != nil {
		t.Fatal(err)
	}
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
	r, err := srv.Do("SCRIPT", "EXISTS", store.scripts[limiter.GCRA].Hash())
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := r.([]any); !ok || len(got) != 1 || got[0] != int64(1) {
		t.Fatalf("SCRIPT EXISTS after a decision = %v: the script is not cached again", r)
	}
}
