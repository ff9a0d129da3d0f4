// Package region makes one rate limit global across regions, each with its
// own Redis. A Set holds every region's client and hands out a
// limiter.Store per Mode, used as limiter.Config.Store, so the limiter's
// deadline, breaker, fail policy and Observer apply unchanged:
//
//   - ModeLocal: the local Redis store; each region enforces the whole limit.
//   - ModeStrict: each key decided on its home region's Redis (a rendezvous
//     hash, or pinned): one exact limit, a round trip away from home; Shard
//     is "region/<home>", so a Guard keeps a breaker per home.
//   - ModeAsync: each region decides on its own Redis, on per-region slots
//     of the key merged by max(), its own shipped to the peers every
//     SyncInterval; nothing on the decision path waits for a peer.
//   - ModeHybrid: async below HybridThreshold × limit, then strict for the
//     rest of the key's window.
//
// The async decisions run the Redis store's own per-algorithm scripts
// (redisstore.DecideFunction) in their multi-region mode, lua/slots.lua,
// sent as generated into lua/generated (go generate ./region/).
// OvershootBound states how far above the limit each mode can admit;
// docs/multi-region.md derives it and gives the measured figures.
package region
