package limitertest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/eventually"
	"github.com/rl-exporter/rl-exporter/limiter"
)

// reserveSets runs the cases of sets that hold their cost parts in
// reservations (limiter.Set.Reserve), for a store that is a SetReserver.
func (c *setSuite) reserveSets(t *testing.T) {
	t.Run("each held part is settled to the actual cost, a charge past its quota included; requests parts keep their 1", c.reserveSettles)
	t.Run("a refused reserving set opens no reservation and takes nothing", c.reserveRefused)
	t.Run("a held part past its hold is settled by its policy, as any reservation", c.reserveSetExpiry)
	t.Run("64 clients reserving and settling: each count is exactly what was settled", c.reserveContention)
}

// reserver is a set whose Limiters hold reservations for hold under policy.
func (c *setSuite) reserver(t *testing.T, hold time.Duration, policy limiter.ExpiryPolicy, lims ...limiter.Limit) (*limiter.Set, []*limiter.Limiter) {
	t.Helper()
	ls := make([]*limiter.Limiter, len(lims))
	for i, lim := range lims {
		l, err := limiter.New(limiter.Config{Limit: lim, Store: c.store, FailPolicy: limiter.FailClosed,
			Timeout: 10 * time.Second, Hold: hold, OnExpiry: policy})
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

// reserveSet reserves on s, failing the test on an error.
func reserveSet(t *testing.T, s *limiter.Set, keys []string, costs []int64, held []bool) ([]limiter.Reservation, []limiter.Decision, bool) {
	t.Helper()
	out, res := make([]limiter.Decision, s.Len()), make([]limiter.Reservation, s.Len())
	ok, err := s.Reserve(context.Background(), keys, costs, held, out, res)
	if err != nil {
		t.Fatalf("Reserve %q %v: %v", keys, costs, err)
	}
	for i, r := range res {
		if (r.ID != "") != (ok && held[i]) || (r.ID != "" && (r.Key != keys[i] || r.Estimate != costs[i])) {
			t.Fatalf("Reserve admitted=%v: part %d (held %v) has reservation %+v", ok, i, held[i], r)
		}
	}
	return res, out, ok
}

// commitAll commits each held part of res at actual through CommitAsync,
// as a proxy does after its response, and waits for every answer.
func commitAll(t *testing.T, ls []*limiter.Limiter, res []limiter.Reservation, actual int64) []limiter.Settlement {
	t.Helper()
	out := make([]limiter.Settlement, len(ls))
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for i, r := range res {
		if r.ID == "" {
			continue
		}
		wg.Add(1)
		ls[i].CommitAsync(context.Background(), r, actual, func(s limiter.Settlement, err error) {
			mu.Lock()
			out[i] = s
			errs = append(errs, err)
			mu.Unlock()
			wg.Done()
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("CommitAsync(%d): %v", actual, err)
	}
	return out
}

// openCounts is each Limiter's open reservations on its key; nil when the
// store keeps no count.
func openCounts(t *testing.T, ls []*limiter.Limiter, keys []string) []int64 {
	t.Helper()
	out := make([]int64, len(ls))
	for i, l := range ls {
		n, err := l.OpenReservations(context.Background(), keys[i])
		if errors.Is(err, limiter.ErrOpenReservationsNotSupported) {
			return nil
		}
		if err != nil {
			t.Fatal(err)
		}
		out[i] = n
	}
	return out
}

// reserveSettles: per algorithm, a held part of 100 a day under it, a
// requests part and an organisation's held part (another slot on a
// Cluster). An estimate of 40 settled at 15 gives 25 back to both held
// parts; one of 10 settled at 90 charges 80 past what is left, and the
// next request is refused by the spent part, taking from none.
func (c *setSuite) reserveSettles(t *testing.T) {
	for _, a := range limiter.AllAlgorithms() {
		if !limiter.SupportsReservations(a) {
			continue
		}
		t.Run(string(a), func(t *testing.T) {
			s, ls := c.reserver(t, time.Minute, limiter.ExpireCharge,
				limiter.Limit{Algorithm: a, Rate: 100, Period: 24 * time.Hour, Burst: 100},
				limiter.Limit{Algorithm: limiter.FixedWindow, Rate: 10, Period: time.Hour},
				limiter.Limit{Algorithm: limiter.FixedWindow, Rate: 1000, Period: time.Hour})
			user, org := c.key(t, "user"), c.key(t, "org")
			keys, held := []string{user, user + ":requests", org}, []bool{true, false, true}
			want := func(what string, rem ...int64) {
				t.Helper()
				if got := remaining(t, ls, keys); fmt.Sprint(got) != fmt.Sprint(rem) {
					t.Fatalf("%s: remaining %v, want %v", what, got, rem)
				}
			}
			res, _, ok := reserveSet(t, s, keys, []int64{40, 1, 40}, held)
			if !ok {
				t.Fatal("a fresh set refused")
			}
			want("after reserving 40", 60, 9, 960)
			if n := openCounts(t, ls, keys); n != nil && fmt.Sprint(n) != "[1 0 1]" {
				t.Fatalf("open reservations after one reserving set: %v, want [1 0 1]", n)
			}
			st := commitAll(t, ls, res, 15)
			if st[0] != (limiter.Settlement{Estimate: 40, Actual: 15, Refunded: 25}) || st[2] != st[0] {
				t.Fatalf("settlements of 15 on 40: %+v", st)
			}
			want("after settling 15 of 40", 85, 9, 985)
			if n := openCounts(t, ls, keys); n != nil && fmt.Sprint(n) != "[0 0 0]" {
				t.Fatalf("open reservations after settling: %v, want none", n)
			}
			res, _, _ = reserveSet(t, s, keys, []int64{10, 1, 10}, held)
			if st := commitAll(t, ls, res, 90); st[0].Charged != 80 || st[2].Charged != 80 {
				t.Fatalf("settlements of 90 on 10: %+v", st)
			}
			want("after settling 90 of 10 with 85 left", 0, 8, 895)
			_, out, ok := reserveSet(t, s, keys, []int64{1, 1, 1}, held)
			if ok || out[0].Allowed || !out[1].Allowed || !out[2].Allowed {
				t.Fatalf("a request after the charge: %v %+v; want refused by the spent part alone", ok, out)
			}
			want("after the refusal", 0, 8, 895)
		})
	}
}

// reserveRefused: the organisation's part refuses; nobody's part is taken
// from and no book records the reservation.
func (c *setSuite) reserveRefused(t *testing.T) {
	s, ls := c.reserver(t, time.Minute, limiter.ExpireCharge,
		limiter.Limit{Algorithm: limiter.TokenBucket, Rate: 1, Period: time.Hour, Burst: 500},
		limiter.Limit{Algorithm: limiter.SlidingWindow, Rate: 10, Period: time.Hour},
		limiter.Limit{Algorithm: limiter.FixedWindow, Rate: 50, Period: time.Hour})
	user, org := c.key(t, "user"), c.key(t, "org")
	keys, held := []string{user, user + ":requests", org}, []bool{true, false, true}
	if d, err := ls[2].AllowN(context.Background(), org, 40); err != nil || !d.Allowed {
		t.Fatalf("AllowN(40) of the organisation's 50: %+v, %v", d, err)
	}
	if _, _, ok := reserveSet(t, s, keys, []int64{20, 1, 20}, held); ok {
		t.Fatal("an estimate of 20 on the organisation's 10 left admitted")
	}
	if got := remaining(t, ls, keys); fmt.Sprint(got) != "[500 10 10]" {
		t.Fatalf("after a refused reserving set: remaining %v, want [500 10 10]", got)
	}
	if n := openCounts(t, ls, keys); n != nil && fmt.Sprint(n) != "[0 0 0]" {
		t.Fatalf("open reservations after a refusal: %v, want none", n)
	}
}

// reserveSetExpiry: a reservation of 40 with a short hold and the refund
// policy is no longer open once its hold ends, and the next write to its
// book (here the next reserving set) gives the 40 back.
func (c *setSuite) reserveSetExpiry(t *testing.T) {
	s, ls := c.reserver(t, 150*time.Millisecond, limiter.ExpireRefund,
		limiter.Limit{Algorithm: limiter.FixedWindow, Rate: 100, Period: 24 * time.Hour},
		limiter.Limit{Algorithm: limiter.FixedWindow, Rate: 1000, Period: 24 * time.Hour})
	user, org := c.key(t, "user"), c.key(t, "org")
	keys, held := []string{user, org}, []bool{true, true}
	reserveSet(t, s, keys, []int64{40, 40}, held)
	if openCounts(t, ls, keys) == nil {
		t.Skip("the store keeps no count of open reservations")
	}
	eventually.True(t, 5*time.Second, "the reservation past its hold no longer open", func() bool {
		return fmt.Sprint(openCounts(t, ls, keys)) == "[0 0]"
	})
	res, _, _ := reserveSet(t, s, keys, []int64{10, 10}, held)
	if got := remaining(t, ls, keys); fmt.Sprint(got) != "[90 990]" {
		t.Fatalf("after the expired 40 was refunded and 10 reserved: remaining %v, want [90 990]", got)
	}
	commitAll(t, ls, res, 10)
}

// reserveContention: 64 clients of 4 users of one organisation reserve an
// estimate of 10 tokens and settle at 0 to 20, beside a requests part;
// afterwards each token count is exactly the sum settled and each
// requests count the sets admitted, every give-back and charge applied
// once.
func (c *setSuite) reserveContention(t *testing.T) {
	const clients, users, rounds = 64, 4, 6
	s, ls := c.reserver(t, time.Minute, limiter.ExpireCharge,
		limiter.Limit{Algorithm: limiter.TokenBucket, Rate: 1, Period: time.Hour, Burst: 100000},
		limiter.Limit{Algorithm: limiter.FixedWindow, Rate: 100000, Period: time.Hour},
		limiter.Limit{Algorithm: limiter.SlidingWindow, Rate: 100000, Period: time.Hour})
	org := c.key(t, "org")
	var mu sync.Mutex
	settled, admitted := map[string]int64{}, map[string]int64{}
	var wg sync.WaitGroup
	for g := range clients {
		wg.Go(func() {
			user := c.key(t, "user"+strconv.Itoa(g%users))
			keys := []string{user, user + ":requests", org}
			for i := range rounds {
				out, res := make([]limiter.Decision, 3), make([]limiter.Reservation, 3)
				ok, err := s.Reserve(context.Background(), keys, []int64{10, 1, 10}, []bool{true, false, true}, out, res)
				if err != nil || !ok {
					t.Errorf("Reserve: %v, %v %+v", ok, err, out)
					return
				}
				actual := int64((g*7 + i*3) % 21)
				var done sync.WaitGroup
				for _, p := range []int{0, 2} {
					done.Add(1)
					ls[p].CommitAsync(context.Background(), res[p], actual, func(_ limiter.Settlement, err error) {
						if err != nil {
							t.Error(err)
						}
						done.Done()
					})
				}
				done.Wait()
				mu.Lock()
				settled[user] += actual
				admitted[user]++
				settled[org] += actual
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for u := range users {
		user := c.key(t, "user"+strconv.Itoa(u))
		got := remaining(t, ls, []string{user, user + ":requests", org})
		if got[0] != 100000-settled[user] || got[1] != 100000-admitted[user] || got[2] != 100000-settled[org] {
			t.Fatalf("user %d: remaining %v; settled %d (organisation %d), admitted %d", u, got, settled[user], settled[org], admitted[user])
		}
	}
}
