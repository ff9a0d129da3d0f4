package simulate

import (
	"context"
	"math"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// regionCopy is one region's copy of the simulated key: a
// limiter.MemoryStore on a clock the simulation sets, so that every
// decision is the store's own. The async merge of region/ is modelled on
// it as follows, with no arithmetic of an algorithm's own:
//
//   - An admission the region knows of (its own, or another region's from
//     a shipping round) is applied to the copy as consumed units whatever
//     the copy would decide, as region/ adds every slot's units (when, see
//     world.stateAt). The copy applies it as a decision under replay, a
//     limit of the same algorithm and period whose quota no simulation
//     reaches: the store keeps one state per key and algorithm whatever
//     the limit's size, and the window algorithms' and gcra's state does
//     not depend on it.
//   - A decision is a peek under the real limit, and hybrid's threshold a
//     peek under the limit of floor(threshold × quota) units, the units
//     region/ compares the estimate with (a request that would take the
//     estimate past them is decided strictly).
//
// token_bucket is run on the store's gcra with the same rate, period and
// burst: the two decide identically, and only gcra's state can hold the
// debt the merge gives a bucket when a region learns of units admitted
// elsewhere after it spent the tokens itself (region/'s token_bucket.lua
// keeps that debt; the store's token bucket stops at empty).
//
// Buckets start empty, as under sustained load: the copy takes the whole
// bucket at time 0.
type regionCopy struct {
	now int64 // µs since the start, the store's clock
	// limit, replay and threshold decide on one MemoryStore, so on one
	// state of the key.
	limit, replay, threshold *limiter.Limiter
	// thresholdUnits is the size of the threshold's limit; with none, no
	// request fits under it.
	thresholdUnits int64
}

// regionKey is the one key of a regional simulation.
const regionKey = "key"

// newRegionCopy is a region's copy of the key before any admission.
func newRegionCopy(c RegionsConfig) (*regionCopy, error) {
	lim := limiter.Limit{Algorithm: c.Algorithm, Rate: c.Rate, Period: c.Period, Burst: c.Burst, AlignWindows: true}
	if lim.Algorithm == limiter.TokenBucket {
		lim.Algorithm = limiter.GCRA
	}
	rc := &regionCopy{thresholdUnits: int64(math.Floor(c.HybridThreshold * float64(lim.Quota())))}
	store := limiter.NewMemoryStore(limiter.MemoryConfig{
		Now:    func() time.Time { return time.UnixMicro(rc.now) },
		Shards: 1,
	})
	var err error
	on := func(l limiter.Limit) *limiter.Limiter {
		if err != nil {
			return nil
		}
		var lr *limiter.Limiter
		lr, err = limiter.New(limiter.Config{Limit: l, Store: store})
		return lr
	}
	rc.limit = on(lim)
	rc.replay = on(withQuota(lim, largestQuota(lim)))
	rc.threshold = on(withQuota(lim, max(rc.thresholdUnits, 1)))
	if err != nil {
		return nil, err
	}
	return rc, rc.reset()
}

// withQuota is lim with a quota of q units: the rate of a window
// algorithm, the burst of a bucket.
func withQuota(lim limiter.Limit, q int64) limiter.Limit {
	if lim.Algorithm.IsBucket() {
		lim.Burst = q
	} else {
		lim.Rate = q
	}
	return lim
}

// largestQuota is the largest quota, a power of two, that a limit like lim
// may have (limiter.Limit.Validate).
func largestQuota(lim limiter.Limit) int64 {
	q := int64(1) << 53
	for q > lim.Quota() && withQuota(lim, q).Validate() != nil {
		q >>= 1
	}
	return q
}

// reset forgets every admission, the bucket taken at time 0.
func (rc *regionCopy) reset() error {
	ctx := context.Background()
	if err := rc.limit.Reset(ctx, regionKey); err != nil {
		return err
	}
	if !rc.limit.Limit().Algorithm.IsBucket() {
		return nil
	}
	rc.now = 0
	_, err := rc.limit.AllowN(ctx, regionKey, rc.limit.Limit().Quota())
	return err
}

// apply records an admission at t (µs), no earlier than the last one.
func (rc *regionCopy) apply(t int64) error {
	rc.now = t
	_, err := rc.replay.Allow(context.Background(), regionKey)
	return err
}

// allows reports whether a request is admitted now.
func (rc *regionCopy) allows() (bool, error) { return peek(rc.limit) }

// overThreshold reports whether a request now would take the copy's
// estimate past hybrid's threshold.
func (rc *regionCopy) overThreshold() (bool, error) {
	if rc.thresholdUnits < 1 {
		return true, nil
	}
	ok, err := peek(rc.threshold)
	return !ok, err
}

func peek(l *limiter.Limiter) (bool, error) {
	d, err := l.PeekN(context.Background(), regionKey, 1)
	return d.Allowed, err
}
