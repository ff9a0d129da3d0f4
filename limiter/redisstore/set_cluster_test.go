package redisstore_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
)

// crossSlotSet measures the bound DecideSet states for sets across slots:
// an organisation's limit (its own slot, decided first) and 16 users'
// (each in its slot), 64 clients at once. The users' quotas bind (16·5 =
// 80 of the organisation's 90), so the organisation's takes are given back
// while other sets are on their way: none may admit past a quota, and once
// all is done each count is what was admitted. Every refusal by the
// organisation is undershoot, takes in flight counted: it is logged, with
// the units the users were left short by the end.
func crossSlotSet(t *testing.T, cl *redistest.ClusterServers, store *redisstore.Store) {
	const clients, users, orgQuota, userQuota, attempts = 64, 16, 90, 5, 6
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	org := "xslot:" + run + ":org"
	lims := []limiter.Limit{
		{Algorithm: limiter.FixedWindow, Rate: orgQuota, Period: time.Hour},
		{Algorithm: limiter.SlidingLog, Rate: userQuota, Period: time.Hour},
	}
	var ls []*limiter.Limiter
	for _, lim := range lims {
		l, err := limiter.New(limiter.Config{Limit: lim, Store: store, FailPolicy: limiter.FailClosed, Timeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
	}
	set, err := limiter.NewSet(ls...)
	if err != nil {
		t.Fatal(err)
	}
	orgSlot, _ := cl.KeySlot(store.Keys(org, lims[0].Algorithm)[0])
	var mu sync.Mutex
	admitted := map[string]int64{}
	var orgRefused, userRefused int64
	var wg sync.WaitGroup
	for g := range clients {
		wg.Go(func() {
			user := "xslot:" + run + ":user" + strconv.Itoa(g%users)
			if s, _ := cl.KeySlot(store.Keys(user, lims[1].Algorithm)[0]); s == orgSlot {
				t.Errorf("user %q shares the organisation's slot %d", user, s)
			}
			out := make([]limiter.Decision, 2)
			for range attempts {
				ok, err := set.Decide(context.Background(), limiter.ModeConsume, []string{org, user}, nil, out)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				switch {
				case ok:
					admitted[org]++
					admitted[user]++
				case !out[0].Allowed:
					orgRefused++
				default:
					userRefused++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if admitted[org] > orgQuota {
		t.Fatalf("the organisation admitted %d, past its quota of %d", admitted[org], orgQuota)
	}
	ctx := context.Background()
	d, err := ls[0].PeekN(ctx, org, 1)
	if err != nil || d.Remaining != orgQuota-admitted[org] {
		t.Fatalf("the organisation admitted %d of %d, but %d remain (%v): a take was kept or lost", admitted[org], orgQuota, d.Remaining, err)
	}
	for u := range users {
		user := "xslot:" + run + ":user" + strconv.Itoa(u)
		d, err := ls[1].PeekN(ctx, user, 1)
		if n := admitted[user]; n > userQuota || err != nil || d.Remaining != userQuota-n {
			t.Fatalf("%s admitted %d of %d, %d remain (%v)", user, n, userQuota, d.Remaining, err)
		}
	}
	t.Logf("cross-slot sets of %d clients: the organisation admitted %d of %d and refused %d (undershoot: takes in flight); the users refused %d and were left %d short of their %d",
		clients, admitted[org], orgQuota, orgRefused, userRefused, users*userQuota-admitted[org], users*userQuota)
}
