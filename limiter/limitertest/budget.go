package limitertest

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// BudgetConfig is a run of clients spending a budget on requests whose
// real cost is known only once they are answered.
type BudgetConfig struct {
	Clients          int
	Windows          int
	MinCost, MaxCost int64 // each request's real cost, uniform
	Estimate         int64 // what admission takes
	// Reserve reserves the estimate and commits the real cost; otherwise
	// the estimate is a plain fixed cost at admission (AllowN), never settled.
	Reserve bool
	Seed    uint64
	// Window is called before window w (from 0) and returns once the
	// limiter's clock is in it, with the key to spend and the time by which
	// the window's requests must be settled (zero: no such time).
	Window func(w int) (key string, end time.Time)
}

// BudgetWindow is what one window of a Budget run spent.
type BudgetWindow struct {
	Spent         int64 // the requests' real costs, in all
	Requests      int64
	LargestExcess int64 // the largest real cost − estimate of one request (≥ 0)
	Remaining     int64 // the store's remaining once all was settled
}

// Overshoot is Spent beyond quota (negative: budget left unspent).
func (w BudgetWindow) Overshoot(quota int64) int64 { return w.Spent - quota }

// Budget runs cfg on l: in each window, in rounds, every client sends a
// request at once; the round's admitted requests are then answered, their
// real costs drawn and (with Reserve) committed, all at once. So as many
// requests are in flight as there are clients, the worst case for the
// overshoot. A window ends with the first round that admits nothing.
func Budget(t testing.TB, l *limiter.Limiter, cfg BudgetConfig) []BudgetWindow {
	t.Helper()
	ctx := context.Background()
	rngs := make([]*rand.Rand, cfg.Clients)
	for c := range rngs {
		rngs[c] = rand.New(rand.NewPCG(cfg.Seed, uint64(c)))
	}
	out := make([]BudgetWindow, cfg.Windows)
	for w := range out {
		key, end := cfg.Window(w)
		win := &out[w]
		for {
			admitted := make([]limiter.Reservation, cfg.Clients)
			errs := make([]error, cfg.Clients)
			var wg sync.WaitGroup
			for c := range cfg.Clients {
				wg.Go(func() {
					if cfg.Reserve {
						r, d, err := l.Reserve(ctx, key, cfg.Estimate)
						if err == nil && d.Allowed {
							admitted[c] = r
						}
						errs[c] = err
						return
					}
					d, err := l.AllowN(ctx, key, cfg.Estimate)
					if err == nil && d.Allowed {
						admitted[c] = limiter.Reservation{Key: key, Estimate: cfg.Estimate}
					}
					errs[c] = err
				})
			}
			wg.Wait()
			costs := make([]int64, cfg.Clients)
			any := false
			for c, r := range admitted {
				if errs[c] != nil {
					t.Fatalf("window %d: client %d: %v", w, c, errs[c])
				}
				if r.Estimate == 0 {
					continue
				}
				any = true
				costs[c] = cfg.MinCost + rngs[c].Int64N(cfg.MaxCost-cfg.MinCost+1)
				win.Spent += costs[c]
				win.Requests++
				win.LargestExcess = max(win.LargestExcess, costs[c]-cfg.Estimate)
				if cfg.Reserve {
					wg.Go(func() { _, errs[c] = l.Commit(ctx, r, costs[c]) })
				}
			}
			wg.Wait()
			for c, err := range errs {
				if err != nil {
					t.Fatalf("window %d: client %d: commit: %v", w, c, err)
				}
			}
			if !any {
				break
			}
		}
		d, err := l.Peek(ctx, key)
		if err != nil {
			t.Fatalf("window %d: peek: %v", w, err)
		}
		win.Remaining = d.Remaining
		if !end.IsZero() && time.Now().After(end) {
			t.Fatalf("window %d: its requests were still being settled at its end: the machine is too slow for this window", w)
		}
	}
	return out
}

// BudgetRuns are the runs of the budget goal: reservations with the
// request's cap (as max_tokens) and with the mean as estimate, against a
// plain fixed cost at admission of each.
var BudgetRuns = []struct {
	Name     string
	Reserve  bool
	Estimate int64
}{
	{"reserve the cap, commit the real cost", true, 500},
	{"reserve the mean, commit the real cost", true, 275},
	{"plain fixed cost of the cap at admission", false, 500},
	{"plain fixed cost of the mean at admission", false, 275},
}

// CheckBudget logs each window and holds reservations to their bound: the
// budget plus the excesses in flight at the last admission, which is no
// more than clients × the largest excess, and none when the estimate is the
// cap, which then leaves less than one estimate unspent; and every commit
// counted once: remaining = budget − spent.
func CheckBudget(t testing.TB, cfg BudgetConfig, budget int64, windows []BudgetWindow) {
	t.Helper()
	for w, win := range windows {
		t.Logf("window %d: %d requests, spent %d of %d (overshoot %+d, %+.1f%%), largest single excess %d",
			w, win.Requests, win.Spent, budget, win.Overshoot(budget), 100*float64(win.Overshoot(budget))/float64(budget), win.LargestExcess)
		if !cfg.Reserve {
			continue
		}
		if bound := budget + int64(cfg.Clients)*win.LargestExcess; win.Spent > bound {
			t.Errorf("window %d: spent %d, above the bound %d", w, win.Spent, bound)
		}
		if win.LargestExcess == 0 && win.Spent < budget-cfg.Estimate {
			t.Errorf("window %d: spent %d: reserving the cap left more than one estimate unspent", w, win.Spent)
		}
		if want := max(budget-win.Spent, 0); win.Remaining != want {
			t.Errorf("window %d: the store has %d remaining after %d spent, want %d", w, win.Remaining, win.Spent, want)
		}
	}
}
