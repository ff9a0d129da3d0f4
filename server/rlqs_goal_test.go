//go:build !race

package server_test

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/eventually"
	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/rlqs/filtersim"
)

// allowedTotals is each client's allowed requests of the chat bucket so far.
func allowedTotals(cs []*filtersim.Client) []uint64 {
	out := make([]uint64, len(cs))
	for i, c := range cs {
		out[i], _ = c.Totals(rlqsChat)
	}
	return out
}

// ratesSince is each client's allowed requests per second since the totals from, taken at since.
func ratesSince(cs []*filtersim.Client, from []uint64, since time.Time) (rates []float64, now []uint64, at time.Time) {
	now, at = allowedTotals(cs), time.Now()
	for i := range cs {
		rates = append(rates, float64(now[i]-from[i])/at.Sub(since).Seconds())
	}
	return rates, now, at
}

// TestGoalAKilledReplicasEnvoysMoveAndAssignmentsContinue: two rl-exporter replicas on one
// Redis, four Envoys (two on each, each listing both replicas) offering 40, 40, 40 and
// 200 requests/s on one bucket of 100/s. Replica a is SIGKILLed: its two Envoys' streams
// reconnect to b at their next report (1 s) and are assigned at once; b divides the limit
// again once a's entries go stale in Redis (3 intervals), and the four are back to their
// demand-proportional shares. Measured: time to re-assignment, time to proportional shares,
// and the allowed totals before, across and after the kill.
func TestGoalAKilledReplicasEnvoysMoveAndAssignmentsContinue(t *testing.T) {
	rds := redistest.Single(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "chat.yaml"), []byte(rlqsChatDomain), 0o600); err != nil {
		t.Fatal(err)
	}
	a, b := startRLQSReplica(t, rds.URL(), dir), startRLQSReplica(t, rds.URL(), dir)
	ga, gb := a.addrs["grpc"], b.addrs["grpc"]
	offers := []float64{40, 40, 40, 200}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var cs []*filtersim.Client
	for i, o := range offers {
		addrs := []string{ga, gb}
		if i >= 2 {
			addrs = []string{gb, ga}
		}
		c := filtersim.Start(filtersim.Config{Addrs: addrs, Domain: "chat", ReportInterval: time.Second})
		t.Cleanup(c.Close)
		c.Offer(ctx, rlqsChat, o)
		cs = append(cs, c)
	}
	proportional := func() bool {
		for i, c := range cs {
			if want := 100 * offers[i] / 320; math.Abs(assignedRate(c)-want) > 0.10*want {
				return false
			}
		}
		return true
	}
	eventually.True(t, 10*time.Second, "shares 12.5, 12.5, 12.5, 62.5 across both replicas", proportional)
	const window = 5 * time.Second
	mark, at := allowedTotals(cs), time.Now()
	<-time.After(window)
	before, _, _ := ratesSince(cs, mark, at)
	checkShares(t, "before the kill", before, offers, 0.10)

	mark = allowedTotals(cs)
	if err := a.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	<-a.done
	// A broken stream is restarted at the filter's next report (1 s), and a's Envoys' first
	// report on b is answered at once.
	eventually.True(t, 2*time.Second, "a's Envoys assigned by b within a report interval", func() bool {
		return cs[0].AssignedAt(rlqsChat).After(killed) && cs[1].AssignedAt(rlqsChat).After(killed)
	})
	t.Logf("a's Envoys re-assigned by b %s after the SIGKILL (their report interval: 1s)", time.Since(killed).Round(time.Millisecond))
	// a's entries go stale in 3 intervals; the moved Envoys' demand is measured at their second
	// report on b: 5 s at most.
	eventually.True(t, 5*time.Second, "shares 12.5, 12.5, 12.5, 62.5 on b alone", proportional)
	across, mark, at := ratesSince(cs, mark, killed)
	t.Logf("demand-proportional shares again %s after the SIGKILL", at.Sub(killed).Round(time.Millisecond))
	total := sum(across)
	t.Logf("from the kill to proportional shares: allowed %.2f/s of the limit 100/s (ratio %.3f), by client %.2f", total, total/100, across)
	// Never over the limit; under it while a's dead entries hold their shares (25 of 100/s) and
	// the moved Envoys start at the floor: 60 % of the limit at least.
	if total > 105 || total < 60 {
		t.Errorf("from the kill to proportional shares: allowed %.2f/s, want between 60 and 105 (the limit 100/s)", total)
	}
	<-time.After(window)
	after, _, _ := ratesSince(cs, mark, at)
	checkShares(t, "after the kill, b alone", after, offers, 0.10)
	for _, c := range cs[:2] {
		if c.Streams() != 2 {
			t.Errorf("an Envoy of a opened %d streams, want 2 (a, then b)", c.Streams())
		}
	}
}

// checkShares logs each client's allowed rate against its share of 100/s and fails the test
// when one is off by more than tol, or all of them by more than 5 % of the limit.
func checkShares(t *testing.T, when string, got, offers []float64, tol float64) {
	t.Helper()
	demand := sum(offers)
	for i, o := range offers {
		want := 100 * o / demand
		t.Logf("%s: client %d offering %.0f/s: allowed %.2f/s, share %.2f/s (ratio %.3f)", when, i, o, got[i], want, got[i]/want)
		if math.Abs(got[i]-want) > tol*want {
			t.Errorf("%s: client %d allowed %.2f/s, want %.2f/s within %.0f%%", when, i, got[i], want, tol*100)
		}
	}
	total := sum(got)
	t.Logf("%s: allowed %.2f/s of the limit 100/s (ratio %.3f)", when, total, total/100)
	if math.Abs(total-100) > 5 {
		t.Errorf("%s: allowed %.2f/s in all, want 100/s within 5%%", when, total)
	}
}

func sum(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s
}
