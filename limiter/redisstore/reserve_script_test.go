package redisstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// reservationScriptsAt returns a's reserve, settle, batch and renew scripts with the
// clock read from the last two ARGV, after checking that nothing else
// differs from the production scripts and that those read TIME once.
func reservationScriptsAt(t *testing.T, a limiter.Algorithm) (reserve, settle, batch, renew *redis.Script) {
	t.Helper()
	r1, s1, b1, n1, err := reservationSources(limiter.SpecOf(a), testClock)
	if err != nil {
		t.Fatal(err)
	}
	r2, s2, b2, n2, err := reservationSources(limiter.SpecOf(a), redisClock)
	if err != nil {
		t.Fatal(err)
	}
	for _, pair := range [][2]string{{r1, r2}, {s1, s2}, {b1, b2}, {n1, n2}} {
		if strings.Replace(pair[0], testClock, redisClock, 1) != pair[1] {
			t.Fatalf("%s: the reservation script at chosen instants is not the production one", a)
		}
		if n := strings.Count(pair[1], redisClock); n != 1 {
			t.Fatalf("%s: the reservation script calls TIME %d times, want once per call", a, n)
		}
		if !strings.HasPrefix(pair[1], "-- Code generated") || !strings.Contains(strings.SplitN(pair[1], "\n", 2)[0], "DO NOT EDIT.") {
			t.Fatalf("%s: the reservation script does not say it is generated", a)
		}
	}
	return redis.NewScript(r1), redis.NewScript(s1), redis.NewScript(b1), redis.NewScript(n1)
}

// runReservation runs one reserve (kind 0), settle (kind 1) or renewal
// (kind 2) alone or, when batched, as a batch of one, and returns its
// integers (five, or four for a settle or renewal). args are those of the
// call alone: np parameters, cost, mode, id, then hold, policy and keep,
// or the actual and the quota.
func runReservation(ctx context.Context, client redis.Scripter, single, batch *redis.Script, batched bool, kind, np int, keys []string, args, clock []any) ([]int64, error) {
	if !batched {
		return single.Run(ctx, client, keys, append(args, clock...)...).Int64Slice()
	}
	set := append([]any{}, args[:np]...)
	value := args[np]
	switch kind {
	case 0, 2:
		set = append(set, args[np+3:]...)
	default:
		set = append(set, 0, args[np+4])
		value = args[np+3]
	}
	argv := append([]any{1, 1, len(set)}, set...)
	argv = append(argv, kind, 0, value, args[np+2])
	ints, err := batch.Run(ctx, client, keys, append(argv, clock...)...).Int64Slice()
	if err == nil && kind != 0 {
		ints = ints[:4]
	}
	return ints, err
}

// TestReservationScriptsMatchTheMemoryStore runs random reserves, commits,
// cancels and plain decisions, with holds that expire under both policies,
// on a real Redis at chosen instants and on the memory store at the same
// instants, and requires identical decisions and settlements.
func TestReservationScriptsMatchTheMemoryStore(t *testing.T) {
	_, store := singleStore(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(3, 4))
	for _, a := range limiter.AllAlgorithms() {
		reserveScript, settleScript, batchScript, renewScript := reservationScriptsAt(t, a)
		decideScript, _ := scriptsAt(t, a)
		for li, lim := range []limiter.Limit{
			{Algorithm: a, Rate: 20, Period: time.Second},
			{Algorithm: a, Rate: 30, Period: 3 * time.Second, Burst: 12, AlignWindows: true},
		} {
			t.Run(fmt.Sprintf("%s limit %d", a, li), func(t *testing.T) {
				key := fmt.Sprintf("reserve-diff:%s:%d:{ü}", a, li)
				keys := append(store.Keys(key, a), store.ReservationKeys(key, a)...)
				clock := newInstants()
				mem := clock.memoryStore()
				period := int64(lim.Period / time.Microsecond)
				keep := 2 * lim.Window().Milliseconds()
				np := limiter.SpecOf(a).NumParams()
				var open []string
				counts := map[string]int{}
				for step := 0; step < 300; step++ {
					if rng.IntN(4) == 0 {
						clock.advance(rng.Int64N(period))
					} else {
						clock.advance(rng.Int64N(period / 20))
					}
					switch op := rng.IntN(10); {
					case op < 4 || len(open) == 0:
						est := 1 + rng.Int64N(lim.Quota()/2)
						id := fmt.Sprintf("r%d", step)
						req := limiter.ReserveRequest{ID: id, Estimate: est,
							Hold: time.Duration(rng.Int64N(2*period)+1) * time.Microsecond, OnExpiry: limiter.ExpiryPolicy(rng.IntN(2))}
						want, err := mem.Reserve(ctx, key, lim, req, 0)
						if err != nil {
							t.Fatal(err)
						}
						args := append(scriptArgs(key, lim, est, limiter.ModeConsume), id, req.Hold.Microseconds(), int64(req.OnExpiry), keep)
						ints, err := runReservation(ctx, store.client, reserveScript, batchScript, step%2 == 0, 0, np, keys, args, clock.clockArgs())
						if err != nil {
							t.Fatalf("step %d: reserve script: %v", step, err)
						}
						r := &request{limit: lim.Quota(), cost: est, mode: limiter.ModeConsume}
						got, err := r.answer(decodeInts(ints))
						if err != nil {
							t.Fatalf("step %d: %v", step, err)
						}
						if got != want {
							t.Fatalf("step %d at +%dµs, reserve %d:\nredis  %+v\nmemory %+v", step, clock.elapsed(), est, got, want)
						}
						if got.Allowed {
							open = append(open, id)
							counts["reserved"]++
						} else {
							counts["rejected"]++
						}
					case op < 6:
						id := open[rng.IntN(len(open))]
						hold := time.Duration(rng.Int64N(2*period)+1) * time.Microsecond
						want, werr := mem.Renew(ctx, key, lim, id, hold, 0)
						args := append(scriptArgs(key, lim, 1, limiter.ModeConsume), id, hold.Microseconds(), 0, keep)
						reply, err := runReservation(ctx, store.client, renewScript, batchScript, step%2 == 1, 2, np, keys, args, clock.clockArgs())
						if err != nil || len(reply) != 4 {
							t.Fatalf("step %d: renew script: %v, %v", step, reply, err)
						}
						if renewed := reply[0] == 1; renewed != (werr == nil) || reply[2] != want.Expired ||
							(renewed && reply[3] != want.Expires.UnixMicro()) {
							t.Fatalf("step %d: renew %s: redis %v, memory %+v, %v", step, id, reply, want, werr)
						}
						if reply[0] == 1 {
							counts["renewed"]++
						}
					case op < 9:
						i := rng.IntN(len(open))
						id := open[i]
						open = append(open[:i], open[i+1:]...)
						actual := rng.Int64N(lim.Quota()) - 1 // -1 cancels
						want, werr := mem.Settle(ctx, key, lim, id, actual, 0)
						args := append(scriptArgs(key, lim, 1, limiter.ModeConsume), id, actual, lim.Quota())
						reply, err := runReservation(ctx, store.client, settleScript, batchScript, step%2 == 1, 1, np, keys, args, clock.clockArgs())
						if err != nil || len(reply) != 4 {
							t.Fatalf("step %d: settle script: %v, %v", step, reply, err)
						}
						var code int64 // what the memory store said: 1 settled, 2 settled late, 0 unknown
						switch {
						case werr == nil:
							code = 1
						case errors.Is(werr, limiter.ErrReservationExpired):
							code = 2
						case !errors.Is(werr, limiter.ErrReservationUnknown):
							t.Fatalf("step %d: settle %s: memory %v", step, id, werr)
						}
						if reply[0] != code || reply[2] != want.Expired || (code != 0 && reply[1] != want.Estimate) ||
							(code == 2 && reply[3] != want.Charged) {
							t.Fatalf("step %d: settle %s: redis %v, memory %+v, %v", step, id, reply, want, werr)
						}
						counts[[...]string{"expired", "settled", "settled late"}[code]]++
					default:
						cost := 1 + rng.Int64N(3)
						want, _ := mem.DecideMode(ctx, key, lim, cost, limiter.ModeConsume, 0)
						reply, err := decideScript.Run(ctx, store.client, store.Keys(key, a),
							append(scriptArgs(key, lim, cost, limiter.ModeConsume), clock.clockArgs()...)...).Result()
						if err != nil {
							t.Fatal(err)
						}
						r := &request{limit: lim.Quota(), cost: cost, mode: limiter.ModeConsume}
						if got, err := r.answer(decodeReply(reply)); err != nil || got != want {
							t.Fatalf("step %d at +%dµs, decide %d:\nredis  %+v, %v\nmemory %+v", step, clock.elapsed(), cost, got, err, want)
						}
					}
				}
				for _, what := range []string{"reserved", "rejected", "settled", "settled late", "renewed"} {
					if counts[what] < 3 {
						t.Fatalf("%v: the sequence does not exercise %s", counts, what)
					}
				}
			})
		}
	}
}
