package config

import (
	"maps"
	"slices"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/shares"
	"github.com/rl-exporter/rl-exporter/region"
)

// validateShares checks the shares of class name: Redis, an interval in
// bounds, and limits a share can hold, each named where it is refused.
func (c *Config) validateShares(e *errs, name string, cl Class) {
	key := "classes." + name + ".shares"
	if !cl.Shares.Enabled {
		if cl.Shares.Interval != 0 {
			e.add(key+".interval", "is read only with shares.enabled: true")
		}
		return
	}
	if c.Store.Type != "redis" {
		e.add(key, "needs store.type redis: a share is reserved from the store the replicas share, and the %s store is each process's own", c.Store.Type)
	}
	if iv := cl.Shares.Interval; iv < time.Millisecond || iv > MaxSharesInterval {
		e.add(key+".interval", "must be 1ms to %s, got %s", MaxSharesInterval, iv)
	}
	for _, tier := range slices.Sorted(maps.Keys(cl.Limits)) {
		l, lk := cl.Limits[tier], "classes."+name+".limits."+tier
		switch {
		case l.List != nil:
			e.add(lk, "a list of limits is decided as one on Redis, which a share cannot: give the tier one limit, or turn shares off")
		case l.IsConcurrency():
			e.add(lk+".algorithm", "concurrency counts requests in flight, which a share cannot hold: turn shares off, or use a rate limit")
		default:
			a, err := limiter.ParseAlgorithm(l.Algorithm)
			if err == nil && !shares.Supports(limiter.Limit{Algorithm: a, NoDelay: l.NoDelay}) {
				e.add(lk+".algorithm", "%s without no_delay delays each request, which a share cannot: set no_delay: true, or turn shares off", a)
			}
		}
		if m := c.RegionMode(name, tier); m != region.ModeLocal {
			e.add(lk+".region_mode", "%s decides on the regions' stores; shares decide on this region's Redis: use region_mode local, or turn shares off", m)
		}
	}
}
