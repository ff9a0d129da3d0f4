package config

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
)

// validateDurabilityReadTimeout refuses a durability_timeout that is not below the read timeout of
// a Redis client that writes with it (store.redis's and each region peer's): the WAIT after each
// script then outlives the socket's read deadline, and every write fails as a timeout.
func (c *Config) validateDurabilityReadTimeout(e *errs) {
	wait := c.Store.Redis.DurabilityTimeout
	check := func(who string, r Redis) {
		read, ok := redisReadTimeout(r)
		if !ok || wait < read {
			return
		}
		fix := fmt.Sprintf("lower it below %s", read)
		if r.URL != "" {
			fix += fmt.Sprintf(", or raise the read timeout in %s.url (such as ?read_timeout=%s)", who, 2*wait)
		}
		e.add("store.redis.durability_timeout", "%s is not below the read timeout of %s's Redis client (%s): each WAIT would outlive it, failing every write as a timeout; %s",
			wait, who, read, fix)
	}
	check("store.redis", c.Store.Redis)
	for _, name := range slices.Sorted(maps.Keys(c.Region.Peers)) {
		check("region.peers."+name, c.Region.Peers[name])
	}
}

// redisReadTimeout is the read timeout of r's client: its URL's read_timeout, else
// redisstore.DefaultReadTimeout; ok is false when the URL turns it off or does not parse (which
// is reported on its own key).
func redisReadTimeout(r Redis) (time.Duration, bool) {
	if r.URL == "" {
		return redisstore.DefaultReadTimeout, true
	}
	o, err := redisstore.ParseURL(r.URL)
	switch {
	case err != nil, o.ReadTimeout < 0:
		return 0, false
	case o.ReadTimeout == 0:
		return redisstore.DefaultReadTimeout, true
	}
	return o.ReadTimeout, true
}
