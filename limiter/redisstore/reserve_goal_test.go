//go:build !race

package redisstore_test

import (
	"fmt"
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
	// Redis's clock cannot be set: each window is a fresh key of a day's
	// window instead of a wait for the next window.
	const budget, clients, period = 10_000, 64, 24 * time.Hour
	srv := redistest.Single(t)
	store := newStore(t, redisstore.ClientConfig{URL: srv.URL(), PoolSize: clients})
	for i, run := range limitertest.BudgetRuns {
		t.Run(run.Name, func(t *testing.T) {
			t.Parallel()
			l, err := limiter.New(limiter.Config{
				Limit: limiter.Limit{Algorithm: limiter.FixedWindow, Rate: budget, Period: period, AlignWindows: true},
				Store: store, FailPolicy: limiter.FailClosed, Timeout: 5 * time.Second,
			})
			if err != nil {
				t.Fatal(err)
			}
			cfg := limitertest.BudgetConfig{
				Clients: clients, Windows: 3, MinCost: 50, MaxCost: 500, Estimate: run.Estimate, Reserve: run.Reserve, Seed: uint64(run.Estimate),
				Window: func(w int) (string, time.Time) {
					return fmt.Sprintf("goal-budget:%d:%d", i, w), time.Time{}
				},
			}
			limitertest.CheckBudget(t, cfg, budget, limitertest.Budget(t, l, cfg))
		})
	}
}
