package region_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/region"
)

// Three regions: a key decided in async until half its limit, then on its
// home region, whose strict slot reaches the third region through the
// region that decided there.
func TestHybridTurnsStrictAtTheThresholdAndEveryRegionCountsTheStrictSlot(t *testing.T) {
	w := newWorld(t, worldConfig{regions: []string{"ap", "eu", "us"}, oneWay: 2 * time.Millisecond, syncInterval: 20 * time.Millisecond})
	const quota = 10
	lim := limiter.Limit{Algorithm: limiter.FixedWindow, Rate: quota, Period: time.Hour}
	key := keyWithRoom(t, "hybrid", time.Hour, time.Minute)
	home := w.sets["ap"].Home(key)
	var others []string
	for _, n := range w.names {
		if n != home {
			others = append(others, n)
		}
	}
	x, y := others[0], others[1]
	ls := w.limiters(t, region.ModeHybrid, region.StoreOptions{HybridThreshold: 0.5}, lim)
	allow := func(n string) bool {
		t.Helper()
		d, err := ls[n].Allow(context.Background(), key)
		if err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		return d.Allowed
	}
	for i := range 5 {
		if !allow(x) {
			t.Fatalf("%s's async decision %d refused", x, i)
		}
	}
	if got := w.obs[x].remote.Load(); got != 0 {
		t.Fatalf("%d of %s's decisions below the threshold crossed regions", got, x)
	}
	// The sixth would pass the threshold: decided on the home region.
	if !allow(x) {
		t.Fatalf("%s's first strict decision refused", x)
	}
	if w.obs[x].remote.Load() != 1 || w.obs[x].rtts.Load() != 1 {
		t.Fatalf("%s's sixth decision: %d remote, %d RTTs observed; want 1 and 1", x, w.obs[x].remote.Load(), w.obs[x].rtts.Load())
	}
	hash := hashKey(key, limiter.FixedWindow)
	waitField(t, w, y, hash, "r:strict@"+home)
	waitSlot(t, w, y, hash, x)
	// y knows 6 of 10 are gone: it decides on home, which admits 4 more.
	admitted := 0
	for range quota {
		if allow(y) {
			admitted++
		}
	}
	if admitted != quota-6 {
		t.Fatalf("%s admitted %d after %s's 6, want %d", y, admitted, x, quota-6)
	}
	if allow(x) {
		t.Fatalf("%s admitted an 11th", x)
	}
}

// waitField waits until region in's copy of hash has field.
func waitField(t *testing.T, w *world, in, hash, field string) {
	t.Helper()
	var err error
	eventually(t, 5*time.Second, func() string {
		return fmt.Sprintf("%s's copy of %s has no %s: %v", in, hash, field, err)
	}, func() bool {
		var ok bool
		ok, err = w.direct[in].HExists(context.Background(), hash, field).Result()
		return err == nil && ok
	})
}
