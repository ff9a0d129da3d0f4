//go:build !race

package rlqs

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/eventually"
	"github.com/rl-exporter/rl-exporter/rlqs/filtersim"
)

// TestGoalSharesFollowDemand: four Envoys offering 40, 40, 40 and 200 requests/s on one bucket of
// 100/s, reporting every second: after 5 intervals each is allowed its demand-proportional share
// (12.5, 12.5, 12.5, 62.5/s) within 10 %, and all of them the limit within 5 %, over 60 s.
func TestGoalSharesFollowDemand(t *testing.T) {
	rules, _ := loadRules(t, chatRules)
	srv := startServer(t, Config{Interval: time.Second}, rules)
	offers := []float64{40, 40, 40, 200}
	var cs []*filtersim.Client
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, o := range offers {
		c := client(t, time.Second, srv.addr)
		c.Offer(ctx, chat, o)
		cs = append(cs, c)
	}
	<-time.After(5 * time.Second) // five report intervals
	start := allowed(cs)
	const window = 60 * time.Second
	<-time.After(window)
	end := allowed(cs)
	total := 0.0
	for i, o := range offers {
		got := float64(end[i]-start[i]) / window.Seconds()
		want := 100 * o / 320
		total += got
		t.Logf("client %d offering %.0f/s: allowed %.2f/s, share %.2f/s (ratio %.3f)", i, o, got, want, got/want)
		if math.Abs(got-want) > 0.10*want {
			t.Errorf("client %d: allowed %.2f/s, want %.2f/s within 10%%", i, got, want)
		}
	}
	t.Logf("all: allowed %.2f/s of the limit 100/s (ratio %.3f)", total, total/100)
	if math.Abs(total-100) > 5 {
		t.Errorf("all: allowed %.2f/s, want 100/s within 5%%", total)
	}
}

func allowed(cs []*filtersim.Client) []uint64 {
	out := make([]uint64, len(cs))
	for i, c := range cs {
		out[i], _ = c.Totals(chat)
	}
	return out
}

// TestGoalCutStreamShareReturns: when one of four Envoys' stream ends, its share goes back to
// the other three within two intervals.
func TestGoalCutStreamShareReturns(t *testing.T) {
	rules, _ := loadRules(t, chatRules)
	srv := startServer(t, Config{Interval: time.Second}, rules)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var cs []*filtersim.Client
	for _, o := range []float64{40, 40, 40, 200} {
		c := client(t, time.Second, srv.addr)
		c.Offer(ctx, chat, o)
		cs = append(cs, c)
	}
	near := func(got, want float64) bool { return math.Abs(got-want) <= 0.05*want }
	eventually.True(t, 10*time.Second, "shares 12.5, 12.5, 12.5, 62.5", func() bool {
		return near(bucketRate(cs[0], chat), 12.5) && near(bucketRate(cs[3], chat), 62.5)
	})
	cs[3].Close()
	took := eventually.True(t, 2*time.Second, "the three others sharing the limit", func() bool {
		for _, c := range cs[:3] {
			if !near(bucketRate(c, chat), 100.0/3) {
				return false
			}
		}
		return true
	})
	t.Logf("the cut stream's share returned to the others in %s (2 intervals: 2s)", took.Round(time.Millisecond))
}
