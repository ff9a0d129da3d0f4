package redisstore_test

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
)

// A key may expire only once its state says what a fresh key says: a
// window's at its end (a fixed window's count gone early would admit a
// whole quota again in the window's last instant), a bucket's when full or
// drained, a log's when its newest entry leaves. The scripts decide on
// TIME's µs but send the time left in whole ms, rounded up and counted by
// Redis from its own whole millisecond, so PEXPIRETIME can be up to a
// millisecond before the state's end; that is exact because Redis drops a
// key only once its millisecond clock is past PEXPIRETIME (it reads keys
// through that whole millisecond). Each key's PEXPIRETIME, with the
// millisecond Redis still reads it, is checked against the end its state
// records, over keys whose windows end at every fraction of a
// millisecond, after a decision and after a settle that charged more than
// its reservation took; an expiry rounded down fails it.
func TestKeysOutliveTheirState(t *testing.T) {
	srv := redistest.Single(t)
	st := newStore(t, redisstore.ClientConfig{URL: srv.URL()})
	ctx := context.Background()
	const keys = 30
	period := time.Hour
	periodUS := float64(period / time.Microsecond)
	num := func(v any) float64 {
		s, _ := v.(string)
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatalf("state value %#v: %v", v, err)
		}
		return f
	}
	fields := func(key string, names ...string) []float64 {
		reply, err := srv.Do(append([]string{"HMGET", key}, names...)...)
		vals, _ := reply.([]any)
		if err != nil || len(vals) != len(names) {
			t.Fatalf("HMGET %s %v: %#v %v", key, names, reply, err)
		}
		out := make([]float64, len(names))
		for i, v := range vals {
			out[i] = num(v)
		}
		return out
	}
	for _, c := range []struct {
		alg   limiter.Algorithm
		rate  int64
		until func(key string, lim limiter.Limit) float64 // µs
	}{
		{limiter.FixedWindow, 1000, func(key string, _ limiter.Limit) float64 { return fields(key, "x")[0] }},
		{limiter.SlidingWindow, 1000, func(key string, _ limiter.Limit) float64 { return fields(key, "x")[0] }},
		{limiter.GCRA, 7, func(key string, _ limiter.Limit) float64 {
			reply, err := srv.Do("GET", key)
			if err != nil {
				t.Fatal(err)
			}
			return num(reply)
		}},
		{limiter.TokenBucket, 7, func(key string, lim limiter.Limit) float64 {
			f := fields(key, "l", "t")
			full := float64(lim.Rate) * periodUS
			return f[1] + math.Ceil((full-f[0])/float64(lim.Rate))
		}},
		{limiter.LeakyBucket, 7, func(key string, lim limiter.Limit) float64 {
			f := fields(key, "l", "t")
			return f[1] + math.Ceil(f[0]/float64(lim.Rate))
		}},
		{limiter.SlidingLog, 1000, func(key string, _ limiter.Limit) float64 {
			reply, err := srv.Do("ZRANGE", key, "-1", "-1", "WITHSCORES")
			vals, _ := reply.([]any)
			if err != nil || len(vals) != 2 {
				t.Fatalf("ZRANGE %s: %#v %v", key, reply, err)
			}
			return num(vals[1]) + periodUS
		}},
	} {
		t.Run(string(c.alg), func(t *testing.T) {
			lim := limiter.Limit{Algorithm: c.alg, Rate: c.rate, Period: period}
			early, checked := 0, 0
			for i := range 2 * keys {
				key := "outlive:" + strconv.Itoa(i)
				if i < keys {
					if d, err := st.Decide(ctx, key, lim, 1); err != nil || !d.Allowed {
						t.Fatalf("decision on %s: %+v %v", key, d, err)
					}
				} else {
					// A settle above the estimate moves the state on by the excess (the adjust path).
					id := "r" + strconv.Itoa(i)
					if d, err := st.Reserve(ctx, key, lim, limiter.ReserveRequest{ID: id, Estimate: 1, Hold: time.Minute}, limiter.DefaultTimeout); err != nil || !d.Allowed {
						t.Fatalf("reservation on %s: %+v %v", key, d, err)
					}
					if _, err := st.Settle(ctx, key, lim, id, 3, limiter.DefaultTimeout); err != nil {
						t.Fatalf("settle on %s: %v", key, err)
					}
				}
				ks := st.Keys(key, c.alg)
				until := c.until(ks[0], lim)
				for _, k := range ks {
					checked++
					reply, err := srv.Do("PEXPIRETIME", k)
					at, _ := reply.(int64)
					if err != nil || at <= 0 {
						t.Fatalf("PEXPIRETIME %s: %#v %v", k, reply, err)
					}
					// Read through the whole millisecond at, gone from at + 1 ms.
					if gone := float64(at+1) * 1000; gone < until {
						early++
						if early == 1 {
							t.Errorf("%s is gone from %.0f µs (PEXPIRETIME %d ms), %.0f µs before its state ends at %.0f µs", k, gone, at, until-gone, until)
						}
					}
					// Kept not much past its state (not an expiry in the wrong unit): a moment more
					// only when 7.0's clock runs on while the script waits for a busy machine's CPU.
					if float64(at)*1000 > until+float64(time.Second/time.Microsecond) {
						t.Errorf("%s expires at %d ms, %.0f µs after its state ends at %.0f µs", k, at, float64(at)*1000-until, until)
					}
				}
			}
			if early > 0 {
				t.Errorf("%d of %d keys expire before their state ends", early, checked)
			}
		})
	}
}

// What an early expiry would do to a client: a fixed window whose key
// Redis dropped before the window's end would begin again from zero in
// its last instant, and a client deciding often enough would take a second
// quota inside one window. Decisions in a tight loop for fifty windows of
// 20 ms, on a key whose windows end 0.7–0.9 ms past a whole millisecond
// (so that the first write of most windows sets a PEXPIRETIME that much
// before the window's end, see TestKeysOutliveTheirState), admit at most
// the quota of each window the loop touched, counted on Redis's clock.
func TestAFixedWindowAdmitsNoSecondQuotaInItsLastInstant(t *testing.T) {
	const period = 20 * time.Millisecond
	lim := limiter.Limit{Algorithm: limiter.FixedWindow, Rate: 5, Period: period}
	key := ""
	for i := 0; key == ""; i++ {
		k := "last-instant:" + strconv.Itoa(i)
		if frac := limiter.WindowOffset(k, period) % time.Millisecond; frac >= 700*time.Microsecond && frac <= 900*time.Microsecond {
			key = k
		}
	}
	srv := redistest.Single(t)
	st := newStore(t, redisstore.ClientConfig{URL: srv.URL()})
	ctx := context.Background()
	redisNow := func() time.Duration {
		reply, err := srv.Do("TIME")
		vals, _ := reply.([]any)
		if err != nil || len(vals) != 2 {
			t.Fatalf("TIME: %#v %v", reply, err)
		}
		s, errS := strconv.ParseInt(fmt.Sprint(vals[0]), 10, 64)
		us, errUS := strconv.ParseInt(fmt.Sprint(vals[1]), 10, 64)
		if errS != nil || errUS != nil {
			t.Fatalf("TIME: %#v", reply)
		}
		return time.Duration(s)*time.Second + time.Duration(us)*time.Microsecond
	}
	start := redisNow()
	admitted := 0
	for redisNow()-start < 50*period {
		for range 20 {
			d, err := st.Decide(ctx, key, lim, 1)
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed {
				admitted++
			}
		}
	}
	end := redisNow()
	off := limiter.WindowOffset(key, period)
	windows := int64((end-off)/period-(start-off)/period) + 1
	if most := windows * lim.Rate; int64(admitted) > most {
		t.Errorf("%d admitted over %d windows of %v, at most %d: a window admitted a second quota", admitted, windows, period, most)
	}
}
