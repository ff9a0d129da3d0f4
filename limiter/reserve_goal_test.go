//go:build !race

package limiter_test

import (
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/limitertest"
)

// TestGoalReservationsHoldABudgetOfRealCosts: a budget of 10,000 per
// minute, 64 concurrent clients, requests costing 50–500 known only once
// answered, 3 windows, on the memory store with a controllable clock (each
// window's requests run at one instant of it, so no minute is waited).
func TestGoalReservationsHoldABudgetOfRealCosts(t *testing.T) {
	const budget, clients = 10_000, 64
	for _, run := range limitertest.BudgetRuns {
		t.Run(run.Name, func(t *testing.T) {
			clk := newFakeClock()
			l, err := limiter.New(limiter.Config{
				Limit: limiter.Limit{Algorithm: limiter.FixedWindow, Rate: budget, Period: time.Minute, AlignWindows: true},
				Store: limiter.NewMemoryStore(limiter.MemoryConfig{Now: clk.Now}),
			})
			if err != nil {
				t.Fatal(err)
			}
			cfg := limitertest.BudgetConfig{
				Clients: clients, Windows: 3, MinCost: 50, MaxCost: 500, Estimate: run.Estimate, Reserve: run.Reserve, Seed: uint64(run.Estimate),
				Window: func(w int) (string, time.Time) {
					clk.Set(time.Duration(w)*time.Minute + time.Second)
					return "tenant", time.Time{}
				},
			}
			limitertest.CheckBudget(t, cfg, budget, limitertest.Budget(t, l, cfg))
		})
	}
}
