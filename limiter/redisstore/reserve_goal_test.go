//go:build !race

package redisstore_test

import (
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/limitertest"
	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
)

// TestGoalReservationsHoldABudgetOfRealCosts is the limiter's budget goal
// on Redis, on its clock: 10,000 per window, 64 concurrent clients,
// requests costing 50–500 known only once answered, 3 windows, with the
// minute scaled down to 2 s (each window's requests take milliseconds, and
// the runs wait for the next window to start together).
func TestGoalReservationsHoldABudgetOfRealCosts(t *testing.T) {
	const budget, clients, period = 10_000, 64, 2 * time.Second
	srv := redistest.Single(t)
	store := newStore(t, redisstore.ClientConfig{URL: srv.URL(), PoolSize: clients})
	for i, run := range limitertest.BudgetRuns {
		t.Run(run.Name, func(t *testing.T) {
			t.Parallel() // the runs wait for the same window starts
			l, err := limiter.New(limiter.Config{
				Limit: limiter.Limit{Algorithm: limiter.FixedWindow, Rate: budget, Period: period, AlignWindows: true},
				Store: store, FailPolicy: limiter.FailClosed, Timeout: 5 * time.Second,
			})
			if err != nil {
				t.Fatal(err)
			}
			cfg := limitertest.BudgetConfig{
				Clients: clients, Windows: 3, MinCost: 50, MaxCost: 500, Estimate: run.Estimate, Reserve: run.Reserve, Seed: uint64(run.Estimate),
				Window: func(int) (string, time.Time) {
					start := time.Now().Truncate(period).Add(period)
					time.Sleep(time.Until(start.Add(20 * time.Millisecond))) // waits for the next window; nothing to synchronise with
					return "goal-budget:" + string(rune('a'+i)), start.Add(period - 100*time.Millisecond)
				},
			}
			limitertest.CheckBudget(t, cfg, budget, limitertest.Budget(t, l, cfg))
		})
	}
}
