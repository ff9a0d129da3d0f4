package region_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/region"
)

// A slot whose window starts far in the future of the receiving Redis's
// clock (its writer's clock stepped forward, or it was forged) is ignored
// by the merge and counted, so that it cannot hide the real counts its
// writer ships afterwards.
func TestAFarFutureSlotIsIgnoredByTheMergeAndTheRealCountsStillApply(t *testing.T) {
	w := newWorld(t, worldConfig{regions: []string{"eu", "us"}, syncInterval: 20 * time.Millisecond})
	ctx := context.Background()
	const quota = 40
	lim := limiter.Limit{Algorithm: limiter.FixedWindow, Rate: quota, Period: time.Hour}
	key := keyWithRoom(t, "skew", time.Hour, time.Minute)
	hash := hashKey(key, limiter.FixedWindow)
	ls := w.limiters(t, region.ModeAsync, region.StoreOptions{}, lim)
	decideEU := func(n int) {
		t.Helper()
		for i := range n {
			if d, err := ls["eu"].Allow(ctx, key); err != nil || !d.Allowed {
				t.Fatalf("eu decision %d: %+v, %v", i, d, err)
			}
		}
	}
	decideEU(1)
	slot, err := w.direct["eu"].HGet(ctx, hash, "r:eu").Result()
	if err != nil {
		t.Fatal(err)
	}
	ws, _, _ := strings.Cut(slot, ":")
	start, err := strconv.ParseInt(ws, 10, 64)
	if err != nil {
		t.Fatalf("eu's slot %q: %v", slot, err)
	}
	// A third region's slot relayed by eu, from a day ahead: its Redis
	// clock had stepped forward.
	future := strconv.FormatInt(start+(24*time.Hour).Microseconds(), 10) + ":0"
	if err := w.direct["eu"].HSet(ctx, hash, "r:ap", future).Err(); err != nil {
		t.Fatal(err)
	}
	decideEU(11)
	waitSlot(t, w, "us", hash, "eu")
	// The shipper tells its observer once the merge has answered, after
	// the slot is in us.
	eventually(t, 5*time.Second, func() string {
		return fmt.Sprintf("rejected slots counted by eu: %d, want at least 1", w.obs["eu"].rejected.Load())
	}, func() bool { return w.obs["eu"].rejected.Load() >= 1 })
	if got, err := w.direct["us"].HGet(ctx, hash, "r:ap").Result(); err == nil {
		t.Errorf("us merged the far-future slot: r:ap = %q", got)
	}
	// The clock is back: the region's real count of this window arrives.
	if err := w.direct["eu"].HSet(ctx, hash, "r:ap", ws+":5").Err(); err != nil {
		t.Fatal(err)
	}
	decideEU(1)
	waitSlot(t, w, "us", hash, "eu")
	admitted := 0
	for range quota {
		d, err := ls["us"].Allow(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			admitted++
		}
	}
	if want := quota - 13 - 5; admitted != want {
		t.Fatalf("us admitted %d after eu's 13 and ap's 5 were shipped, want %d", admitted, want)
	}
}
