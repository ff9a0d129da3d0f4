package limitertest

import (
	"context"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// BenchmarkSets measures set decisions on store from 64 callers at once
// (b.SetParallelism), over 100,000 users of 1,000 organisations: one
// limit decided alone (Limiter.AllowN: sliding_window requests), the same
// as a set of one part, and a set of three (that, token_bucket tokens and
// a calendar month's quota per organisation). The set benchmarks report
// their decisions per second as a share of the one limit's
// (x_one_limit), so run "one_limit" with them. "apart=3" decides the
// three limits one after another (three AllowN, no atomicity): what a set
// of three would cost were being all or nothing free. "parts=3,held=2" is a whole
// request of a list whose class reads its cost: the three decided as one,
// the tokens and the month held (Set.Reserve), then both settled at 5
// (CommitAsync) and waited for.
func BenchmarkSets(b *testing.B, store limiter.Store) {
	const callers, users, orgs = 64, 100_000, 1_000
	mk := func(lim limiter.Limit) *limiter.Limiter {
		l, err := limiter.New(limiter.Config{Limit: lim, Store: store, Timeout: 10 * time.Second})
		if err != nil {
			b.Fatal(err)
		}
		return l
	}
	month := limiter.PerCalendar(1<<40, &limiter.Calendar{Unit: limiter.Month, Location: time.UTC})
	requests := mk(limiter.PerMinute(limiter.SlidingWindow, 1<<20))
	tokens := mk(limiter.Limit{Algorithm: limiter.TokenBucket, Rate: 1 << 20, Period: time.Minute})
	quota := mk(month)
	run := uniqueRun()
	userKeys, orgKeys := make([]string, users), make([]string, orgs)
	for i := range userKeys {
		userKeys[i] = "bench:" + run + ":user:" + strconv.Itoa(i)
	}
	for i := range orgKeys {
		orgKeys[i] = "bench:" + run + ":org:" + strconv.Itoa(i)
	}
	userKey := func(i int) string { return userKeys[i%users] }
	orgKey := func(i int) string { return orgKeys[i%orgs] }
	costs := []int64{1, 7, 1}
	var oneNs float64
	parallel := func(b *testing.B, decide func(ctx context.Context, i int, out []limiter.Decision) error) float64 {
		return decideInParallel(b, callers, users, decide)
	}
	b.Run("one_limit", func(b *testing.B) {
		oneNs = parallel(b, func(ctx context.Context, i int, _ []limiter.Decision) error {
			_, err := requests.AllowN(ctx, userKey(i), 1)
			return err
		})
	})
	for _, parts := range []int{1, 3} {
		ls := []*limiter.Limiter{requests, tokens, quota}[:parts]
		set, err := limiter.NewSet(ls...)
		if err != nil {
			b.Fatal(err)
		}
		b.Run("parts="+strconv.Itoa(parts), func(b *testing.B) {
			ns := parallel(b, func(ctx context.Context, i int, out []limiter.Decision) error {
				var keys [3]string
				keys[0], keys[1], keys[2] = userKey(i), userKey(i), orgKey(i)
				_, err := set.Decide(ctx, limiter.ModeConsume, keys[:parts], costs[:parts], out[:parts])
				return err
			})
			if oneNs > 0 {
				b.ReportMetric(oneNs/ns, "x_one_limit")
			}
		})
	}
	b.Run("apart=3", func(b *testing.B) {
		ns := parallel(b, func(ctx context.Context, i int, out []limiter.Decision) error {
			if _, err := requests.AllowN(ctx, userKey(i), 1); err != nil {
				return err
			}
			if _, err := tokens.AllowN(ctx, userKey(i), 7); err != nil {
				return err
			}
			_, err := quota.AllowN(ctx, orgKey(i), 1)
			return err
		})
		if oneNs > 0 {
			b.ReportMetric(oneNs/ns, "x_one_limit")
		}
	})
	b.Run("parts=3,held=2", func(b *testing.B) {
		set, err := limiter.NewSet(requests, tokens, quota)
		if err != nil {
			b.Fatal(err)
		}
		held := []bool{false, true, true}
		ns := parallel(b, func(ctx context.Context, i int, out []limiter.Decision) error {
			keys := []string{userKey(i), userKey(i), orgKey(i)}
			var res [3]limiter.Reservation
			if _, err := set.Reserve(ctx, keys, costs, held, out, res[:]); err != nil {
				return err
			}
			return commitHeld(ctx, set, res[:], 5)
		})
		if oneNs > 0 {
			b.ReportMetric(oneNs/ns, "x_one_limit")
		}
	})
}

// decideInParallel runs decide b.N times from callers goroutines, each from its own place among
// users (i), and reports and returns the nanoseconds per decision.
func decideInParallel(b *testing.B, callers, users int, decide func(ctx context.Context, i int, out []limiter.Decision) error) float64 {
	b.SetParallelism((callers + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	b.ReportAllocs()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		i := int(time.Now().UnixNano() % int64(users))
		out := make([]limiter.Decision, 3)
		for pb.Next() {
			i += 7919
			if err := decide(ctx, i, out); err != nil {
				b.Error(err)
				return
			}
		}
	})
	ns := float64(time.Since(start).Nanoseconds()) / float64(b.N)
	b.ReportMetric(1e9/ns, "decisions/s")
	return ns
}

// commitHeld commits each reservation of res on its Limiter of set at actual, as a proxy does
// after its response (CommitAsync), and waits for them.
func commitHeld(ctx context.Context, set *limiter.Set, res []limiter.Reservation, actual int64) error {
	done := make(chan error, len(res))
	n := 0
	for i, r := range res {
		if r.ID == "" {
			continue
		}
		n++
		set.Limiter(i).CommitAsync(ctx, r, actual, func(_ limiter.Settlement, err error) { done <- err })
	}
	var first error
	for range n {
		if err := <-done; err != nil && first == nil {
			first = err
		}
	}
	return first
}
