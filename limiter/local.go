package limiter

import (
	"context"
	"hash/maphash"
	"sync"
	"time"
)

// InstanceCounter knows how many instances share the store's budget (a
// heartbeat in the store keeps the count while the store is up). It is
// what FailLocal divides a limit by. Implementations are safe for
// concurrent use and cheap: InstanceCount runs on the decision path of
// degraded decisions.
type InstanceCounter interface {
	// InstanceCount returns the last known number of live instances, or 0
	// when it has never been known.
	InstanceCount() int
}

// LocalConfig configures the local decisions of FailLocal.
type LocalConfig struct {
	// Instances counts the instances that share the store. Nil: this
	// instance alone (each instance then enforces the whole limit).
	Instances InstanceCounter
	// MinInstances is the smallest count a limit is divided by, for when
	// the count was never known (the store was down from the start).
	// Default 1.
	MinInstances int
	// MaxKeys bounds the keys whose last store decision is remembered.
	// Default DefaultLocalMaxKeys.
	MaxKeys int
	// Store decides locally. Default: a new MemoryStore with Now.
	Store Store
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// DefaultLocalMaxKeys is the default bound on the keys a LocalFallback
// remembers (about 100 bytes each with a short key).
const DefaultLocalMaxKeys = 100_000

// LocalFallback makes the decisions of FailLocal while the store is down,
// so that the instances together keep the store's budget:
//
//   - each instance enforces its share of the limit: the limit divided by
//     the number of live instances last known (LocalConfig.Instances), at
//     least LocalConfig.MinInstances, and at least 1 per window;
//   - a key whose last store decision is remembered keeps its spent budget:
//     its local share starts from the remaining the store last gave it,
//     divided by the same count, until the store's reset of that key;
//   - when the store answers again, a key decided locally in its current
//     window (or bucket refill) is held to both the store and its local
//     share until the local state has reset, so the return of the store
//     brings no burst, even when the store came back empty.
//
// The bound assumes the instances see a key's traffic in turns (a load
// balancer's spread): an instance that last saw a key long before the
// others carries an older remaining.
//
// One LocalFallback is meant to be shared by every Limiter on one store
// (see Guard) and to outlive reloads. It is safe for concurrent use.
type LocalFallback struct {
	cfg    LocalConfig
	store  Inspector // cfg.Store, called as an Inspector
	seed   maphash.Seed
	shards [localShards]localShard
	per    int // keys per shard
}

const localShards = 64

type localShard struct {
	mu   sync.Mutex
	keys map[string]localEntry
}

// localEntry is what is remembered of one key, in Unix nanoseconds.
type localEntry struct {
	// remaining and resetAt are from the key's last store decision.
	remaining int64
	resetAt   int64
	// localUntil is when the key's local state is as good as fresh: until
	// then the local share is enforced on top of the store.
	localUntil int64
	// instances is the count the local share was divided by, kept for the
	// share enforced after the store returns (when a restarted store's
	// count of instances is still filling up).
	instances int
}

// NewLocalFallback returns a LocalFallback configured by cfg.
func NewLocalFallback(cfg LocalConfig) *LocalFallback {
	if cfg.MinInstances < 1 {
		cfg.MinInstances = 1
	}
	if cfg.MaxKeys <= 0 {
		cfg.MaxKeys = DefaultLocalMaxKeys
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Store == nil {
		cfg.Store = NewMemoryStore(MemoryConfig{Now: cfg.Now})
	}
	f := &LocalFallback{cfg: cfg, store: asInspector(cfg.Store), seed: maphash.MakeSeed(), per: max(1, cfg.MaxKeys/localShards)}
	for i := range f.shards {
		f.shards[i].keys = map[string]localEntry{}
	}
	return f
}

// Instances returns the count limits are divided by now.
func (f *LocalFallback) Instances() int {
	n := 0
	if f.cfg.Instances != nil {
		n = f.cfg.Instances.InstanceCount()
	}
	return max(n, f.cfg.MinInstances)
}

// Share returns an instance's share of lim when n instances share it:
// Rate (and Burst) divided by n, rounded down, at least 1.
func Share(lim Limit, n int) Limit {
	if n <= 1 {
		return lim
	}
	lim.Rate = max(1, lim.Rate/int64(n))
	if lim.Burst > 0 {
		lim.Burst = max(1, lim.Burst/int64(n))
	}
	return lim
}

func (f *LocalFallback) shard(key string) *localShard {
	return &f.shards[maphash.String(f.seed, key)%localShards]
}

// decide makes a local decision for key while the store is down.
func (f *LocalFallback) decide(ctx context.Context, key string, lim Limit, cost int64, mode Mode) (Decision, error) {
	n := f.Instances()
	share := Share(lim, n)
	now := f.cfg.Now().UnixNano()
	if mode == ModeAtMost {
		cost = min(cost, share.Quota())
	}
	if cost > share.Quota() {
		// More than this instance's share could ever admit.
		return Decision{Limit: share.Quota(), RetryAfter: share.Window(), ResetAfter: share.Window()}, nil
	}
	sh := f.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e, known := sh.keys[key]
	if known && e.localUntil <= now && e.resetAt > now && mode != ModePeek {
		// The key's local state is fresh but the store had spent some of
		// its budget: start from the remaining the store gave it.
		left := min(share.Quota(), max(0, e.remaining)/int64(n))
		if spent := share.Quota() - left; spent > 0 {
			sd, err := f.store.DecideMode(ctx, key, share, spent, ModeConsume, 0)
			if err == nil {
				e.localUntil = max(e.localUntil, now+int64(sd.ResetAfter))
			}
		}
	}
	d, err := f.store.DecideMode(ctx, key, share, cost, mode, 0)
	if err != nil || mode == ModePeek {
		// A peek leaves the local state as it was.
		return d, err
	}
	e.localUntil = max(e.localUntil, now+int64(max(d.ResetAfter, d.RetryAfter)))
	e.instances = n
	f.putLocked(sh, key, e, now)
	return d, nil
}

// afterStore remembers the store's decision d for key and, while the key's
// local state has not reset since it was last decided locally, holds an
// admission to the local share as well. It returns the decision to give.
func (f *LocalFallback) afterStore(ctx context.Context, key string, lim Limit, mode Mode, d Decision) Decision {
	if mode == ModePeek {
		return d // nothing was taken, nothing to hold or remember
	}
	cost := d.Admitted
	now := f.cfg.Now().UnixNano()
	sh := f.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e, known := sh.keys[key]
	if known && e.localUntil > now && d.Allowed {
		share := Share(lim, e.instances)
		if mode == ModeAtMost {
			cost = min(cost, share.Quota())
		}
		if cost <= share.Quota() {
			ld, err := f.store.DecideMode(ctx, key, share, cost, mode, 0)
			if err == nil {
				if !ld.Allowed {
					d.Allowed, d.Delay, d.Admitted = false, 0, 0
					d.RetryAfter = ld.RetryAfter
				} else if mode == ModeAtMost {
					d.Admitted = min(d.Admitted, ld.Admitted)
				}
				d.Remaining = min(d.Remaining, ld.Remaining)
			}
		}
	}
	e.remaining = d.Remaining
	e.resetAt = now + int64(d.ResetAfter)
	f.putLocked(sh, key, e, now)
	return d
}

// putLocked stores e, evicting a key when the shard is full: one whose
// knowledge has expired if the first few looked at include one.
func (f *LocalFallback) putLocked(sh *localShard, key string, e localEntry, now int64) {
	if _, ok := sh.keys[key]; !ok && len(sh.keys) >= f.per {
		victim, looked := "", 0
		for k, old := range sh.keys {
			if victim == "" || (old.resetAt <= now && old.localUntil <= now) {
				victim = k
				if old.resetAt <= now && old.localUntil <= now {
					break
				}
			}
			if looked++; looked >= 8 {
				break
			}
		}
		delete(sh.keys, victim)
	}
	sh.keys[key] = e
}

// reset forgets what is remembered of key and its local state under lim.
func (f *LocalFallback) reset(ctx context.Context, key string, lim Limit) {
	sh := f.shard(key)
	sh.mu.Lock()
	delete(sh.keys, key)
	sh.mu.Unlock()
	_ = f.store.Reset(ctx, key, lim, 0) // ErrNotSupported from a plain Store
}
