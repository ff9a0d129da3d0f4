package decision

import "github.com/rl-exporter/rl-exporter/limiter"

// Record is Recorded of o asked under endpoint, planTier and key and decided on lim, so that a
// test can check the record of any outcome Judge gives.
func (o Outcome) Record(endpoint, planTier, key string, lim limiter.Limit) limiter.Record {
	o.Endpoint, o.Tier, o.Key, o.Limit = endpoint, planTier, key, lim
	return o.Recorded()
}
