package limitertest

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// RunSets runs the set cases (limiter.Set) against store, a SetStore; Run
// runs them for every store that is one. Keys differ per user and per
// organisation, so that on a Redis Cluster a set spans several slots.
func RunSets(t *testing.T, store limiter.Store) {
	t.Helper()
	c := &setSuite{store: store, run: uniqueRun()}
	t.Run("set", func(t *testing.T) {
		t.Parallel()
		t.Run("a request refused by any part leaves every other part's count unchanged", c.refusedTakesNothing)
		t.Run("sliding_window requests, token_bucket tokens and a calendar month's quota decide as one", c.mixed)
		t.Run("peek takes nothing", c.peek)
		t.Run("64 concurrent clients over 3 windows: no part admits past its quota, and every take is counted once", c.contention)
		if _, ok := c.store.(limiter.SetReserver); ok {
			t.Run("reserving sets", c.reserveSets)
		}
	})
}

type setSuite struct {
	store limiter.Store
	run   string
}

func (c *setSuite) key(t *testing.T, name string) string {
	return "set:" + c.run + ":" + t.Name() + ":" + name
}

// set returns the Set of lims on the store (FailClosed: a store failure
// fails the test as a refusal would not) and its Limiters.
func (c *setSuite) set(t *testing.T, lims ...limiter.Limit) (*limiter.Set, []*limiter.Limiter) {
	t.Helper()
	ls := make([]*limiter.Limiter, len(lims))
	for i, lim := range lims {
		l, err := limiter.New(limiter.Config{Limit: lim, Store: c.store, FailPolicy: limiter.FailClosed, Timeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		ls[i] = l
	}
	s, err := limiter.NewSet(ls...)
	if err != nil {
		t.Fatal(err)
	}
	return s, ls
}

// decide makes one set decision and checks what every answer must hold.
func decideSet(t *testing.T, s *limiter.Set, mode limiter.Mode, keys []string, costs []int64) ([]limiter.Decision, bool) {
	t.Helper()
	out := make([]limiter.Decision, s.Len())
	ok, err := s.Decide(context.Background(), mode, keys, costs, out)
	if err != nil {
		t.Fatalf("set %s %q %v: %v", mode, keys, costs, err)
	}
	refused := false
	for i, d := range out {
		if d.Failure != limiter.FailureNone || d.Remaining < 0 || d.RetryAfter < 0 || d.ResetAfter < 0 {
			t.Fatalf("part %d: %+v", i, d)
		}
		wantAdmitted := int64(0)
		if ok && mode == limiter.ModeConsume {
			wantAdmitted = costs[i]
		}
		if d.Admitted != wantAdmitted {
			t.Fatalf("part %d of a set admitted=%v in %s: Admitted %d, want %d (%+v)", i, ok, mode, d.Admitted, wantAdmitted, d)
		}
		if !d.Allowed {
			refused = true
			if d.RetryAfter <= 0 {
				t.Fatalf("part %d refuses without a retry-after: %+v", i, d)
			}
		}
	}
	if ok == refused {
		t.Fatalf("set admitted=%v, but parts refusing: %v (%+v)", ok, refused, out)
	}
	return out, ok
}

// remaining peeks each Limiter alone: what its key has left.
func remaining(t *testing.T, ls []*limiter.Limiter, keys []string) []int64 {
	t.Helper()
	out := make([]int64, len(ls))
	for i, l := range ls {
		d, err := l.PeekN(context.Background(), keys[i], 1)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = d.Remaining
	}
	return out
}

func (c *setSuite) refusedTakesNothing(t *testing.T) {
	for _, a := range limiter.AllAlgorithms() {
		t.Run(string(a), func(t *testing.T) {
			// Part 0, under a, refuses first; parts 1 and 2 would admit.
			s, ls := c.set(t,
				limiter.Limit{Algorithm: a, Rate: 3, Period: time.Hour, Burst: 3},
				limiter.Limit{Algorithm: limiter.TokenBucket, Rate: 100, Period: time.Hour},
				limiter.Limit{Algorithm: limiter.FixedWindow, Rate: 50, Period: time.Hour})
			// Part 0 has a key of its own: under token_bucket it would
			// share part 1's state.
			user, org := c.key(t, "user"), c.key(t, "org")
			keys := []string{user + ":requests", user, org}
			costs := []int64{1, 10, 2}
			for i := 0; i < 3; i++ {
				if out, ok := decideSet(t, s, limiter.ModeConsume, keys, costs); !ok {
					t.Fatalf("request %d refused: %+v", i, out)
				}
			}
			before := remaining(t, ls, keys)
			if want := []int64{0, 70, 44}; fmt.Sprint(before) != fmt.Sprint(want) {
				t.Fatalf("remaining after 3 requests: %v, want %v", before, want)
			}
			for i := 0; i < 3; i++ {
				out, ok := decideSet(t, s, limiter.ModeConsume, keys, costs)
				if ok || out[0].Allowed || !out[1].Allowed || !out[2].Allowed {
					t.Fatalf("request %d over part 0's quota: %v %+v", i, ok, out)
				}
				if out[1].Remaining != 70 || out[2].Remaining != 44 {
					t.Fatalf("the parts that would admit answer as they are: %+v", out)
				}
			}
			if after := remaining(t, ls, keys); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Fatalf("refused requests moved the counts: %v, before %v", after, before)
			}
			// The last part refuses (another user, the organisation's quota
			// spent): the user's parts keep their fresh counts.
			other := c.key(t, "other")
			keys2 := []string{other + ":requests", other, org}
			if out, ok := decideSet(t, s, limiter.ModeConsume, keys2, []int64{1, 10, 45}); ok || out[2].Allowed || !out[0].Allowed || !out[1].Allowed {
				t.Fatalf("a cost over the organisation's remaining 44: %v %+v", ok, out)
			}
			if got := remaining(t, ls, keys2); fmt.Sprint(got) != fmt.Sprint([]int64{3, 100, 44}) {
				t.Fatalf("after a refusal by the last part: %v, want [3 100 44]", got)
			}
		})
	}
}

func (c *setSuite) mixed(t *testing.T) {
	loc, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Skipf("no time zone data: %v", err)
	}
	month := limiter.PerCalendar(7, &limiter.Calendar{Unit: limiter.Month, Location: loc})
	s, ls := c.set(t,
		limiter.PerMinute(limiter.SlidingWindow, 5),
		limiter.Limit{Algorithm: limiter.TokenBucket, Rate: 100, Period: time.Hour},
		month)
	user, org := c.key(t, "user"), c.key(t, "org")
	keys := []string{user, user, org}
	for i := 0; i < 3; i++ {
		if out, ok := decideSet(t, s, limiter.ModeConsume, keys, []int64{1, 30, 1}); !ok {
			t.Fatalf("request %d of 30 tokens: %+v", i, out)
		}
	}
	// 10 tokens left: 30 more are refused by the bucket alone.
	out, ok := decideSet(t, s, limiter.ModeConsume, keys, []int64{1, 30, 1})
	if ok || !out[0].Allowed || out[1].Allowed || !out[2].Allowed || out[1].Remaining != 10 {
		t.Fatalf("30 tokens of 10 left: %v %+v", ok, out)
	}
	if got := remaining(t, ls, keys); fmt.Sprint(got) != fmt.Sprint([]int64{2, 10, 4}) {
		t.Fatalf("after the bucket's refusal: %v, want [2 10 4]", got)
	}
	if _, ok := decideSet(t, s, limiter.ModeConsume, keys, []int64{1, 10, 1}); !ok {
		t.Fatal("the last 10 tokens refused")
	}
	// Another user of the organisation: the month's 3 left, then refused.
	other := c.key(t, "other")
	keys = []string{other, other, org}
	for i := 0; i < 3; i++ {
		if out, ok := decideSet(t, s, limiter.ModeConsume, keys, []int64{1, 1, 1}); !ok {
			t.Fatalf("request %d of the month's last 3: %+v", i, out)
		}
	}
	out, ok = decideSet(t, s, limiter.ModeConsume, keys, []int64{1, 1, 1})
	if ok || out[2].Allowed || !out[0].Allowed || !out[1].Allowed {
		t.Fatalf("over the month's quota: %v %+v", ok, out)
	}
	// The month's retry-after is its end, in New York.
	if now := time.Now().In(loc); out[2].RetryAfter > 31*24*time.Hour+time.Hour || now.Add(out[2].RetryAfter).In(loc).Day() != 1 {
		t.Fatalf("the month refuses until %s, not the 1st", now.Add(out[2].RetryAfter))
	}
	if got := remaining(t, ls, keys); fmt.Sprint(got) != fmt.Sprint([]int64{2, 97, 0}) {
		t.Fatalf("after the month's refusal: %v, want [2 97 0]", got)
	}
}

func (c *setSuite) peek(t *testing.T) {
	for _, a := range limiter.AllAlgorithms() {
		t.Run(string(a), func(t *testing.T) {
			s, ls := c.set(t,
				limiter.Limit{Algorithm: a, Rate: 4, Period: time.Hour, Burst: 4},
				limiter.Limit{Algorithm: limiter.GCRA, Rate: 9, Period: time.Hour})
			user, org := c.key(t, "user"), c.key(t, "org")
			keys := []string{user, org}
			decideSet(t, s, limiter.ModeConsume, keys, []int64{1, 2})
			for i := 0; i < 5; i++ {
				out, ok := decideSet(t, s, limiter.ModePeek, keys, []int64{3, 7})
				if !ok || out[0].Remaining != 3 || out[1].Remaining != 7 {
					t.Fatalf("peek %d: %v %+v", i, ok, out)
				}
				out, ok = decideSet(t, s, limiter.ModePeek, keys, []int64{4, 7})
				if ok || out[0].Allowed || !out[1].Allowed {
					t.Fatalf("peek %d over part 0: %v %+v", i, ok, out)
				}
			}
			if got := remaining(t, ls, keys); fmt.Sprint(got) != fmt.Sprint([]int64{3, 7}) {
				t.Fatalf("after peeks: %v, want [3 7]", got)
			}
			fresh := []string{c.key(t, "fresh"), c.key(t, "fresh-org")}
			if out, ok := decideSet(t, s, limiter.ModePeek, fresh, []int64{4, 9}); !ok || out[0].Remaining != 4 {
				t.Fatalf("peek of fresh keys: %v %+v", ok, out)
			}
		})
	}
}

// contention: 64 clients of 4 users of one organisation. First on limits
// of an hour, after which each part's count is exactly what it admitted
// (a take given back is not counted, a take kept is); then for 3 windows of
// aligned fixed windows, where no window of a part admits past its quota.
func (c *setSuite) contention(t *testing.T) {
	const clients, users = 64, 4
	ctx := context.Background()
	hour := []limiter.Limit{
		{Algorithm: limiter.SlidingLog, Rate: 30, Period: time.Hour},
		{Algorithm: limiter.TokenBucket, Rate: 1, Period: time.Hour, Burst: 200},
		{Algorithm: limiter.FixedWindow, Rate: 90, Period: time.Hour},
	}
	s, ls := c.set(t, hour...)
	org := c.key(t, "org")
	var mu sync.Mutex
	admitted := map[string]int64{}
	var wg sync.WaitGroup
	for g := range clients {
		wg.Go(func() {
			user := c.key(t, "user"+strconv.Itoa(g%users))
			keys := []string{user, user, org}
			for i := range 8 {
				costs := []int64{1, int64(1 + (g+i)%9), 1}
				out := make([]limiter.Decision, 3)
				ok, err := s.Decide(ctx, limiter.ModeConsume, keys, costs, out)
				if err != nil {
					t.Error(err)
					return
				}
				if ok {
					mu.Lock()
					admitted["log:"+user]++
					admitted["bucket:"+user] += costs[1]
					admitted["org"]++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if admitted["org"] > 90 {
		t.Fatalf("the organisation admitted %d of 90", admitted["org"])
	}
	for u := range users {
		user := c.key(t, "user"+strconv.Itoa(u))
		got := remaining(t, ls, []string{user, user, org})
		if log, bucket := admitted["log:"+user], admitted["bucket:"+user]; log > 30 || bucket > 200 || got[0] != 30-log || got[1] != 200-bucket {
			t.Fatalf("user %d admitted %d requests and %d tokens; remaining %v", u, log, bucket, got)
		}
		if got[2] != 90-admitted["org"] {
			t.Fatalf("the organisation admitted %d of 90 but %d remain", admitted["org"], got[2])
		}
	}
	t.Logf("an hour's limits: the organisation admitted %d of 90 (users: %v)", admitted["org"], admitted)
	c.windows(t)
}

// windows runs 64 clients over 3 windows of 400ms; each admitted answer's
// window is found from its ResetAfter (the window's end, aligned).
func (c *setSuite) windows(t *testing.T) {
	const clients, users, period = 64, 4, 400 * time.Millisecond
	lims := []limiter.Limit{
		{Algorithm: limiter.FixedWindow, Rate: 20, Period: period, AlignWindows: true},
		{Algorithm: limiter.TokenBucket, Rate: 100, Period: period, Burst: 40},
		{Algorithm: limiter.FixedWindow, Rate: 50, Period: period, AlignWindows: true},
	}
	s, _ := c.set(t, lims...)
	org := c.key(t, "org-windows")
	type count struct {
		key    string
		window int64
	}
	var mu sync.Mutex
	perWindow := map[count]int64{}
	tokens := map[string]int64{}
	var calls, refused int64
	start := time.Now()
	end := start.Add(3 * period)
	var wg sync.WaitGroup
	for g := range clients {
		wg.Go(func() {
			user := c.key(t, "user-windows"+strconv.Itoa(g%users))
			keys := []string{user, user, org}
			out := make([]limiter.Decision, 3)
			for i := 0; time.Now().Before(end); i++ {
				costs := []int64{1, int64(1 + (g+i)%4), 1}
				ok, err := s.Decide(context.Background(), limiter.ModeConsume, keys, costs, out)
				at := time.Now()
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				calls++
				if ok {
					for _, p := range []int{0, 2} {
						w := int64(math.Round(float64(at.Add(out[p].ResetAfter).UnixNano()) / float64(period)))
						perWindow[count{keys[p], w}]++
					}
					tokens[user] += costs[1]
				} else {
					refused++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	for k, n := range perWindow {
		quota := lims[0].Rate
		if k.key == org {
			quota = lims[2].Rate
		}
		if n > quota {
			t.Fatalf("%s admitted %d in window %d, past its quota of %d", k.key, n, k.window, quota)
		}
	}
	for user, n := range tokens {
		if bound := lims[1].Burst + int64(float64(lims[1].Rate)*elapsed.Seconds()/period.Seconds()) + 1; n > bound {
			t.Fatalf("%s admitted %d tokens in %s, past the bucket's %d", user, n, elapsed, bound)
		}
	}
	var orgWindows []int64
	for k, n := range perWindow {
		if k.key == org {
			orgWindows = append(orgWindows, n)
		}
	}
	t.Logf("3 windows of %s: %d set calls, %d refused; the organisation admitted %v per window (quota %d)", period, calls, refused, orgWindows, lims[2].Rate)
}
