package limiter

import (
	"context"
	"hash/maphash"
	"sync"
	"time"
)

// InstanceCounter counts the live instances sharing the store's budget
// (0: never known). It must be safe for concurrent use and cheap.
type InstanceCounter interface {
	InstanceCount() int
}

// LocalConfig configures FailLocal's decisions.
type LocalConfig struct {
	Instances    InstanceCounter  // nil: this instance enforces the whole limit
	MinInstances int              // the least count a limit is divided by; default DefaultMinInstances
	MaxKeys      int              // keys remembered; default DefaultLocalMaxKeys
	Store        Store            // default: a new MemoryStore on Now
	Now          func() time.Time // default time.Now
}

// Defaults of LocalConfig.
const (
	// DefaultLocalMaxKeys is LocalConfig.MaxKeys' default (about 100 B a key).
	DefaultLocalMaxKeys = 100_000
	// DefaultMinInstances: a store down from the start does not starve the keys.
	DefaultMinInstances = 1
)

// LocalFallback makes FailLocal's decisions, so that the instances together keep the
// store's budget: each enforces the limit divided by the live instances, from what the
// store last left; back on the store, a key decided locally is held to its share until
// that resets, so the return brings no burst. It assumes a key's traffic is spread
// over the instances. Safe for concurrent use.
type LocalFallback struct {
	cfg    LocalConfig
	store  Inspector
	seed   maphash.Seed
	shards [localShards]localShard
	per    int // keys per shard
}

const localShards = 64

type localShard struct {
	mu   sync.Mutex
	keys map[string]localEntry
}

// localEntry is what is remembered of one key; times in Unix ns.
type localEntry struct {
	remaining, resetAt int64 // of the last store decision
	localUntil         int64 // until then the share is enforced on top of the store
	instances          int   // kept while a restarted store's count fills up
}

// NewLocalFallback returns a LocalFallback, ready for concurrent use.
func NewLocalFallback(cfg LocalConfig) *LocalFallback {
	if cfg.MinInstances < 1 {
		cfg.MinInstances = DefaultMinInstances
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

// Share returns lim with Rate and Burst divided by n, at least 1.
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

func (f *LocalFallback) decide(ctx context.Context, key string, lim Limit, cost int64, mode Mode) (Decision, error) {
	n := f.Instances()
	share := Share(lim, n)
	now := f.cfg.Now().UnixNano()
	if mode == ModeAtMost {
		cost = min(cost, share.Quota())
	}
	if cost > share.Quota() {
		return Decision{Limit: share.Quota(), RetryAfter: share.Window(), ResetAfter: share.Window()}, nil
	}
	sh := f.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e, known := sh.keys[key]
	if known && e.localUntil <= now && e.resetAt > now && mode != ModePeek {
		// Fresh locally, but the store had spent some: start from its remaining.
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
		return d, err
	}
	e.localUntil = max(e.localUntil, now+int64(max(d.ResetAfter, d.RetryAfter)))
	e.instances = n
	f.putLocked(sh, key, e, now)
	return d, nil
}

// afterStore remembers d and holds key to its local share until that resets.
func (f *LocalFallback) afterStore(ctx context.Context, key string, lim Limit, mode Mode, d Decision) Decision {
	if mode == ModePeek {
		return d
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

// putLocked evicts from a full shard one of the first keys, expired if any.
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

func (f *LocalFallback) reset(ctx context.Context, key string, lim Limit) {
	sh := f.shard(key)
	sh.mu.Lock()
	delete(sh.keys, key)
	sh.mu.Unlock()
	_ = f.store.Reset(ctx, key, lim, 0) // ErrNotSupported from a plain Store
}
