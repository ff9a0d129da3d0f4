// Package region makes one rate limit global across regions, each region
// with its own Redis.
//
// A Set holds every region's Redis client (the local one and the peers')
// and hands out a limiter.Store per Mode, to be used as limiter.Config.Store:
// the limiter's deadline, circuit breaker, fail policy and Observer apply
// unchanged, regions sit behind the limiter, never beside it.
//
//   - ModeLocal: the local region's Redis store; each region enforces the
//     whole limit on its own traffic (up to limit × regions globally).
//   - ModeStrict: every key has a home region, a rendezvous hash of the key
//     over the sorted region names (or a pinned region), and its decisions
//     run on the home region's Redis with the single-region scripts:
//     exactly one global limit, one cross-region round trip away from home.
//     The store is a limiter.ShardedStore whose Shard is "region/<home>",
//     so a Guard keeps a circuit breaker per home region.
//   - ModeAsync: each region decides on its own Redis against a global
//     view: per key, one hash holding one slot per region (a grow-only
//     counter per window or bucket epoch), its own slot incremented by the
//     decision, the others' as last shipped. A shipper sends this region's
//     changed slots to every peer every SyncInterval, one pipeline per peer,
//     merged there with max() (idempotent, order-free). Nothing on the
//     decision path waits for a peer.
//   - ModeHybrid: async while a key's global estimate stays below
//     HybridThreshold × limit, then strict (on the home region's Redis, in a
//     slot of its own counted with the async ones) for the rest of the
//     key's window.
//
// OvershootBound states how far above the limit each mode can admit.
// docs/multi-region.md derives it, describes the slots, the shipping and
// the buckets' reconstruction, and gives the figures measured by this
// package's TestGoal tests.
package region
