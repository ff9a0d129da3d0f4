package redisquota_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rl-exporter/rl-exporter/internal/eventually"
	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/quota"
	"github.com/rl-exporter/rl-exporter/quota/redisquota"
)

func newClient(t *testing.T, url string) redis.UniversalClient {
	t.Helper()
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

func TestReplicasSeeEachOthersClientsUntilGoneOrStale(t *testing.T) {
	rds := redistest.Single(t)
	// Two replicas, each its own client, as two rl-exporter processes.
	r1 := redisquota.New(newClient(t, rds.URL()), "rl")
	r2 := redisquota.New(newClient(t, rds.URL()), "rl")
	ctx := context.Background()
	// A clock an hour off: entries are timed on Redis's clock, so it changes nothing.
	skewed := time.Now().Add(time.Hour)
	const stale = 500 * time.Millisecond
	if _, err := r1.Exchange(ctx, "k", []quota.Demand{{Client: "r1/a", Rate: 12.5, Known: true}, {Client: "r1/new"}}, nil, skewed, stale); err != nil {
		t.Fatal(err)
	}
	all, err := r2.Exchange(ctx, "k", []quota.Demand{{Client: "r2/b", Rate: 1e-3, Known: true}}, nil, time.Now(), stale)
	if err != nil {
		t.Fatal(err)
	}
	want := []quota.Demand{{Client: "r1/a", Rate: 12.5, Known: true}, {Client: "r1/new"}, {Client: "r2/b", Rate: 1e-3, Known: true}}
	if !equal(all, want) {
		t.Fatalf("r2 sees %+v, want %+v", all, want)
	}
	pttl, err := rds.Do("PTTL", "rl:quota:k")
	if err != nil || pttl.(int64) <= 0 || pttl.(int64) > 2*stale.Milliseconds() {
		t.Fatalf("PTTL of rl:quota:k: %v (%v), want within (0, %d]: a limit no replica exchanges goes away", pttl, err, 2*stale.Milliseconds())
	}
	all, _ = r1.Exchange(ctx, "k", nil, []string{"r1/new"}, skewed, stale)
	if len(all) != 2 {
		t.Fatalf("after r1/new is gone: %+v", all)
	}
	// r1 keeps recording a; r2 falls silent (a crash): its client is dropped past stale.
	took := eventually.True(t, 4*stale, "r2/b dropped", func() bool {
		all, err = r1.Exchange(ctx, "k", []quota.Demand{{Client: "r1/a", Rate: 12.5, Known: true}}, nil, skewed, stale)
		return err == nil && len(all) == 1 && all[0].Client == "r1/a"
	})
	if took < stale/2 {
		t.Errorf("r2/b dropped after %s, well before stale %s", took, stale)
	}
}

func TestMalformedEntryIsAnError(t *testing.T) {
	rds := redistest.Single(t)
	s := redisquota.New(newClient(t, rds.URL()), "rl")
	if _, err := rds.Do("HSET", "rl:quota:k", "x", "1 notanumber"); err != nil {
		t.Fatal(err)
	}
	_, err := s.Exchange(context.Background(), "k", nil, nil, time.Now(), 0)
	if err == nil || !strings.Contains(err.Error(), `"x"`) {
		t.Fatalf("a malformed entry: error %v, want one naming client \"x\"", err)
	}
}

func equal(a, b []quota.Demand) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
