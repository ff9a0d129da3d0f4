// Package shares lets each replica of a fleet decide from a local share of a limit kept in a
// shared store (Redis), so that a decision costs no round trip. It knows nothing of HTTP or
// Prometheus.
//
// A share is a bulk reservation (limiter.Reserver): per limit and key, a Store reserves a chunk
// of units from the shared store under the algorithm's own rule, hands them out locally, and
// settles the chunk at what it handed out when the chunk is used up, when its life is over,
// when the key was idle for that life, or on Close, the unused rest going back to the shared
// state. A busy key's chunk (16 units an interval or more) is sized by its local demand over
// the last Interval, at most MaxFraction of the quota, and lives one Interval. A slower key's
// lives as many Intervals as make 16 units at its rate, at most 10, and holds that rate's
// units: at 10,000 keys and 100,000 decisions/s each key asks about one unit an interval, and
// a chunk of one Interval would cost more calls than it saves. When the shared state refuses a
// chunk the Store takes what is left instead (Decision.Remaining), so that the last units of a
// window are not stranded. A key that would hold fewer than 4 units is decided on the shared
// store as without shares: its chunk would cost two calls for fewer decisions.
//
// Nothing is admitted that was not first taken from the shared state, so the shared store's
// rule holds for the units taken. What differs is when a unit is used: up to a chunk's life
// after it was taken. Hence the bound, per key:
//
//   - fixed_window: none beyond the rule; a chunk is not used past the end of the window it was
//     taken from (the store's ResetAfter, counted from before the call was sent).
//   - the others (token_bucket, gcra, leaky_bucket with nodelay, sliding_window, sliding_log):
//     a span of time may admit, beyond the rule, the units the replicas held unused at its
//     start, taken before it: at most replicas × the largest chunk (MaxFraction of the quota).
//
// The price is the other way: units a replica holds are not available to the others until it
// settles them, at most a chunk's life and an Interval later (a busy key's: two Intervals; a
// slow key's: up to 11, but its chunk is only what it asks in that time), so a replica may
// refuse while another still holds units; under a steady demand every replica's chunks are
// used up well within that time.
//
// A give-back that the shared store does not acknowledge (down, or slower than Timeout) leaves
// its reservation to expire charged: its unused units are lost for the window, never admitted
// twice. It is counted (Stats.SettleErrors) and logged at WARN, summarised (Config.Logger).
//
// leaky_bucket without nodelay cannot hold a share: its admissions carry a Delay each, which a
// bulk reservation would lose (Supports).
package shares
