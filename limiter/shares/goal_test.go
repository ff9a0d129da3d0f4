//go:build !race

package shares_test

import (
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/shares"
)

// TestGoalSharesHoldTheLimitAcrossTwoReplicas is the shares' accuracy goal: two replicas with
// shares on (interval 100ms, the defaults) offered twice a fixed window's limit between them,
// unevenly (1,500/s and 500/s against 1,000 a second), admit in total within 2% of the limit
// and never more than it in any window, over 60 whole windows of 1 s.
func TestGoalSharesHoldTheLimitAcrossTwoReplicas(t *testing.T) {
	srv := redistest.Single(t)
	const period, run = time.Second, 62 * time.Second
	lim := limiter.Limit{Algorithm: limiter.FixedWindow, Rate: 1000, Period: period, AlignWindows: true}
	ls := replicas(t, srv, lim, 2, shares.Config{Timeout: 5 * time.Second})
	stop := make(chan struct{})
	time.AfterFunc(run, func() { close(stop) })
	all := replicaLoad(t, ls, "goal", []int{3, 1}, 2*time.Millisecond, stop)
	first, last := all[0].start.UnixNano()/int64(period)+1, all[len(all)-1].end.UnixNano()/int64(period)-1
	per := map[int64]int64{}
	var total int64
	for _, a := range all {
		w0, w1 := a.start.UnixNano()/int64(period), a.end.UnixNano()/int64(period)
		if w0 == w1 && w0 >= first && w0 <= last { // whole windows of the run; no straddler
			per[w0]++
			total++
		}
	}
	for w, n := range per {
		if n > lim.Rate {
			t.Errorf("window %d admitted %d, limit %d", w, n, lim.Rate)
		}
	}
	want := (last - first + 1) * lim.Rate
	ratio := float64(total) / float64(want)
	t.Logf("two replicas admitted %d in %d whole windows of %d: %.2f%% of the limit", total, last-first+1, lim.Rate, 100*ratio)
	if ratio < 0.98 || ratio > 1.0 {
		t.Errorf("admitted %.2f%% of the limit, want 98%% to 100%%", 100*ratio)
	}
}
