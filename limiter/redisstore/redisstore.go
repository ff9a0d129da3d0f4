// Package redisstore is the Redis limiter.Store: a fleet of processes that
// share one Redis (a single server, a Sentinel-managed primary or a Redis
// Cluster) shares every limit exactly.
//
// Each decision is one Lua script call, atomic on Redis, on Redis's clock; each
// algorithm's arithmetic is one file, lua/<algorithm>.lua, generated into
// lua/generated. Concurrent operations share a batch and its round trip
// (batch.go); every script goes through one runner, EVALSHA then EVAL on
// NOSCRIPT. A key k under algorithm a is <prefix>:{<escaped k>}:<a>, one
// Cluster slot. docs/redis-store.md describes batching, failover and keys.
package redisstore

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rl-exporter/rl-exporter/limiter"
)

//go:embed lua/*.lua
var luaFiles embed.FS

// DefaultPrefix is the default first component of every key.
const DefaultPrefix = "rl"

// Config configures a Store. The zero value is usable.
type Config struct {
	// Prefix starts every key, so applications can share one Redis; no '{' or '}'.
	Prefix string
	// Batch says how concurrent decisions share script calls.
	Batch BatchConfig
	// ClusterRefreshMinInterval spaces the slot map reloads failed calls ask for; negative: none.
	ClusterRefreshMinInterval time.Duration
	// BatchTracer, when set, is told of every batch.
	BatchTracer BatchTracer
	// Durability says whether a decision waits for a replica.
	Durability Durability
	// DurabilityTimeout bounds DurabilityWait. Default DefaultDurabilityTimeout.
	DurabilityTimeout time.Duration
	// ReplicationObserver, when set, is told of unacknowledged writes.
	ReplicationObserver ReplicationObserver
	// FailoverObserver, when set, is told of writes a Sentinel failover
	// may have left on the demoted primary.
	FailoverObserver FailoverObserver
}

// FailoverObserver is told of the decisions whose writes may have landed
// on a primary that a Sentinel was demoting; called concurrently, it must
// be cheap.
type FailoverObserver interface {
	// ObserveFailoverUnconfirmed reports n such decisions.
	ObserveFailoverUnconfirmed(n int)
}

// Durability says what a decision waits for before it is answered.
type Durability uint8

const (
	// DurabilityNone answers once the primary ran the script; a failover loses unreplicated writes.
	DurabilityNone Durability = iota
	// DurabilityWait pipelines WAIT 1 <DurabilityTimeout> after each call,
	// never past the decision's deadline: answered once a replica holds the
	// write or the timeout passes (the write still counts, unreplicated).
	// While the primary lists no online replica (ROLE, asked every 100 ms or
	// after a WAIT no replica answered: a newly promoted primary), WAIT is
	// skipped and the write counted unreplicated at once. Not on a Cluster.
	DurabilityWait
)

// DefaultDurabilityTimeout leaves half the Limiter's default timeout for the round trip.
const DefaultDurabilityTimeout = 50 * time.Millisecond

// ReplicationObserver is told of the writes no replica acknowledged in
// time; called concurrently, it must be cheap.
type ReplicationObserver interface {
	// ObserveUnreplicated reports n such writes (err: WAIT's own error;
	// nil when it timed out or was not sent, the primary having no replica).
	ObserveUnreplicated(n int, err error)
}

// DefaultClusterRefreshMinInterval is Config.ClusterRefreshMinInterval's default.
const DefaultClusterRefreshMinInterval = 100 * time.Millisecond

// BatchTracer links batches, which run on contexts of their own, to the decisions'
// traces. It is called concurrently from the senders.
type BatchTracer interface {
	// TraceBatch returns the context to send with and its end (or nil); decisions are not to be kept.
	TraceBatch(batch context.Context, decisions []context.Context) (context.Context, func())
}

// Store is a limiter.Store on Redis, safe for concurrent use. The limits'
// state is on Redis alone, so any number of Stores on one Redis share it.
type Store struct {
	client       redis.UniversalClient
	cluster      bool
	single       *redis.Client // nil on a Cluster; what the ownConns hold
	typedReplies bool          // go-redis's parser, not resp.go (a Cluster's, to follow MOVED and ASK)
	// encode is (*encoder).encode; BenchmarkSpeedMechanisms swaps layouts.
	encode func(e *encoder, dst []any, sc *algScripts, g *group) []any
	cc     *redis.ClusterClient // the client, on a Cluster
	// refreshMin and lastRefresh (Unix ns) bound noteError's reloads.
	refreshMin  time.Duration
	lastRefresh atomic.Int64
	prefix      string
	algs        [limiter.NumAlgorithms]algScripts // by AlgorithmSpec.Index
	batch       *batcher                          // nil without batching
	// alone: a connection per call that may go alone at once (Store.send).
	alone    []ownConn
	requests sync.Pool
	// durability is DurabilityWait's timeout, 0 under DurabilityNone;
	// repl what it knows of the primary's replicas (durability.go).
	durability time.Duration
	repl       replicas
	// spoiled: connections whose read a WAIT cut short (keepRan), closed when given back.
	spoiled      sync.Map
	replObs      ReplicationObserver
	unreplicated atomic.Int64
	// fence keeps writes off a primary being demoted (nil but on a Sentinel
	// client); unconfirmed counts those that may have landed on it anyway.
	fence       *fence
	failObs     FailoverObserver
	unconfirmed atomic.Int64
	resv        *[limiter.NumAlgorithms]reserveScripts // by AlgorithmSpec.Index
	leases      *opScripts
	sets        *script  // lua/generated/set.lua, alone and batched
	async       asyncOps // operations nobody waits for, for Close
}

// New returns a Store on client (only a *redis.Client, Sentinel's
// included, or a *redis.ClusterClient batch). It does not contact Redis.
func New(client redis.UniversalClient, cfg Config) (*Store, error) {
	if client == nil {
		return nil, errors.New("redisstore: client is required")
	}
	var fc *fence
	if f, ok := client.(*FailoverClient); ok {
		client, fc = f.Client, f.fence
	}
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	if strings.ContainsAny(cfg.Prefix, "{}") {
		return nil, fmt.Errorf("redisstore: prefix %q: must not contain '{' or '}'", cfg.Prefix)
	}
	algs, err := loadScripts()
	if err != nil {
		return nil, fmt.Errorf("redisstore: %w", err)
	}
	resv, err := loadReserveScripts()
	if err != nil {
		return nil, err
	}
	leases, err := leaseScripts()
	if err != nil {
		return nil, err
	}
	sets, err := setScript()
	if err != nil {
		return nil, fmt.Errorf("redisstore: %w", err)
	}
	s := &Store{client: client, prefix: cfg.Prefix, algs: algs, resv: resv, leases: leases, sets: sets, fence: fc, failObs: cfg.FailoverObserver}
	s.requests.New = func() any { return &request{done: make(chan struct{}, 1)} }
	s.async.zero = make(chan struct{}, 1)
	s.cc, s.cluster = client.(*redis.ClusterClient)
	s.typedReplies = s.cluster
	s.encode = (*encoder).encode
	s.refreshMin = cfg.ClusterRefreshMinInterval
	if s.refreshMin == 0 {
		s.refreshMin = DefaultClusterRefreshMinInterval
	}
	switch cfg.Durability {
	case DurabilityNone:
	case DurabilityWait:
		if s.cluster {
			return nil, errors.New("redisstore: durability wait: not supported on a Redis Cluster")
		}
		if cfg.DurabilityTimeout == 0 {
			cfg.DurabilityTimeout = DefaultDurabilityTimeout
		}
		if cfg.DurabilityTimeout < time.Millisecond {
			return nil, fmt.Errorf("redisstore: durability timeout %s: must be at least 1ms", cfg.DurabilityTimeout)
		}
		s.durability = cfg.DurabilityTimeout
		s.replObs = cfg.ReplicationObserver
	default:
		return nil, fmt.Errorf("redisstore: unknown durability %d", cfg.Durability)
	}
	c, single := client.(*redis.Client)
	if !cfg.Batch.Disabled && (s.cluster || single) {
		s.batch = newBatcher(s, cfg.Batch, cfg.BatchTracer)
	}
	s.alone = make([]ownConn, 1)
	if single && s.batch != nil {
		// One more per sender (lane.claim), if the pool keeps as many again for its other users.
		if held := 1 + 2*int(s.batch.senders); c.Options().PoolSize >= 2*held {
			s.alone = make([]ownConn, 1+s.batch.senders)
		}
	}
	if single {
		s.single = c
		for i := range s.alone {
			s.alone[i].client = c
		}
	}
	return s, nil
}

// Name is "redis".
func (s *Store) Name() string { return "redis" }

// Warm loads the scripts and opens the connections, so that a first decision on a
// distant Redis does not spend its timeout dialling. Optional; safe for concurrent use.
func (s *Store) Warm(ctx context.Context) error {
	conns := len(s.alone)
	if s.batch != nil {
		conns += int(s.batch.senders)
	}
	warm := func(ctx context.Context, c redis.Cmdable) error {
		on := make([]redis.Cmdable, conns)
		for i := range on {
			on[i] = c
			if cl, ok := c.(*redis.Client); ok {
				cn := cl.Conn()
				defer cn.Close()
				on[i] = cn
			}
		}
		errs := make([]error, conns)
		var wg sync.WaitGroup
		wg.Go(func() {
			pipe := on[0].Pipeline()
			for i := range s.algs {
				pipe.ScriptLoad(ctx, s.algs[i].single.src)
				pipe.ScriptLoad(ctx, s.algs[i].batch.src)
			}
			pipe.ScriptLoad(ctx, s.sets.src)
			if _, err := pipe.Exec(ctx); err != nil {
				errs[0] = fmt.Errorf("load scripts: %w", err)
			}
		})
		for i := 1; i < conns; i++ {
			wg.Go(func() { errs[i] = on[i].Ping(ctx).Err() })
		}
		wg.Wait()
		return errors.Join(errs...)
	}
	var err error
	if s.cluster {
		err = s.cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return warm(ctx, c) })
	} else {
		err = warm(ctx, s.client)
	}
	if err != nil {
		return fmt.Errorf("redis store: warm: %w", err)
	}
	return nil
}

// Shard names the master that decides for key on a Cluster (per the current slot map), so that
// a breaker per shard opens for a dead master's keys alone; "" elsewhere. Safe for concurrent use.
func (s *Store) Shard(key string) string {
	if !s.cluster {
		return ""
	}
	var b strings.Builder
	b.Grow(len(key) + 2)
	b.WriteByte('{')
	writeEscaped(&b, key)
	b.WriteByte('}')
	node, err := s.cc.MasterForKey(context.Background(), b.String())
	if err != nil {
		return ""
	}
	return node.Options().Addr
}

// Masters returns a Cluster's master addresses (the names Shard gives),
// nil on a single server or Sentinel. Safe for concurrent use.
func (s *Store) Masters(ctx context.Context) ([]string, error) {
	if !s.cluster {
		return nil, nil
	}
	var mu sync.Mutex
	var addrs []string
	err := s.cc.ForEachMaster(ctx, func(_ context.Context, c *redis.Client) error {
		mu.Lock()
		addrs = append(addrs, c.Options().Addr)
		mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("redis store: cluster masters: %w", err)
	}
	slices.Sort(addrs)
	return addrs, nil
}

// Keys returns the Redis keys a decision for key under a touches.
func (s *Store) Keys(key string, a limiter.Algorithm) []string {
	base := s.baseKey(key, a)
	spec := limiter.SpecOf(a)
	if spec == nil {
		return []string{base}
	}
	keys := spec.KeySuffixes()
	for i, suffix := range keys {
		keys[i] = base + suffix
	}
	return keys
}

func (s *Store) baseKey(key string, a limiter.Algorithm) string {
	var b strings.Builder
	b.Grow(len(s.prefix) + len(key) + len(a) + 8)
	b.WriteString(s.prefix)
	b.WriteString(":{")
	writeEscaped(&b, key)
	b.WriteString("}:")
	b.WriteString(string(a))
	return b.String()
}

// writeEscaped percent-encodes '%', '{' and '}' and writes "" as "%00", so that the
// hash tag is never "{}", which Redis Cluster would ignore.
func writeEscaped(b *strings.Builder, key string) {
	if key == "" {
		b.WriteString("%00")
		return
	}
	if !strings.ContainsAny(key, "%{}") {
		b.WriteString(key)
		return
	}
	for i := 0; i < len(key); i++ {
		switch c := key[i]; c {
		case '%':
			b.WriteString("%25")
		case '{':
			b.WriteString("%7B")
		case '}':
			b.WriteString("%7D")
		default:
			b.WriteByte(c)
		}
	}
}

// Reset implements limiter.Inspector: one DEL of the key's keys.
func (s *Store) Reset(ctx context.Context, key string, lim limiter.Limit, timeout time.Duration) error {
	if limiter.SpecOf(lim.Algorithm) == nil {
		_, err := limiter.ParseAlgorithm(string(lim.Algorithm))
		return fmt.Errorf("redis store: limit: %w", err)
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	keys := s.Keys(key, lim.Algorithm)
	if err := s.client.Del(ctx, keys...).Err(); err != nil {
		s.noteError(err)
		return fmt.Errorf("redis DEL %s: %w", strings.Join(keys, " "), err)
	}
	return nil
}

// Unconfirmed counts the decisions whose writes may have landed on a
// primary a Sentinel was demoting: on their way when the promotion was
// seen. Safe for concurrent use.
func (s *Store) Unconfirmed() int64 { return s.unconfirmed.Load() }

// enter registers a call about to be sent with the fence (nil: none).
func (s *Store) enter() *generation {
	if s.fence == nil {
		return nil
	}
	return s.fence.enter()
}

// leave ends a call entered as g whose n writes ran, counting them
// unconfirmed when a promotion was seen meanwhile.
func (s *Store) leave(g *generation, n int) {
	if g == nil {
		return
	}
	if u := s.fence.leave(g, n); u > 0 {
		s.unconfirmed.Add(int64(u))
		if s.failObs != nil {
			s.failObs.ObserveFailoverUnconfirmed(u)
		}
	}
}

// fenced reports whether err is a write the fence refused (nothing sent).
func fenced(err error) bool { return err != nil && errors.Is(err, errFenced) }

// Unreplicated counts the writes no replica acknowledged in time
// (DurabilityWait). Safe for concurrent use.
func (s *Store) Unreplicated() int64 { return s.unreplicated.Load() }

// scriptCmd is a Cluster script command, never sent again after a network
// error: a script whose reply was lost may have run.
type scriptCmd struct{ *redis.Cmd }

// NoRetry implements go-redis's retry opt-out.
func (scriptCmd) NoRetry() bool { return true }

// noteError reloads a Cluster's slot map (at most once per refreshMin): go-redis alone
// would keep a dead master's slots until its next periodic reload.
func (s *Store) noteError(err error) {
	if staleMapError(err) {
		s.RefreshShards()
	}
}

// RefreshShards implements limiter.ShardRefresher: it asks for the Cluster's
// slot map in the background, at most once per ClusterRefreshMinInterval
// (shared with noteError's reloads); a no-op elsewhere. Safe for concurrent use.
func (s *Store) RefreshShards() {
	if !s.cluster || s.refreshMin < 0 {
		return
	}
	now := time.Now().UnixNano()
	last := s.lastRefresh.Load()
	if now-last < int64(s.refreshMin) || !s.lastRefresh.CompareAndSwap(last, now) {
		return
	}
	s.cc.ReloadState(context.Background())
}

// isMoved, isAsk (a migrating slot) and isTryAgain (nothing ran) tell Cluster errors apart.
func isMoved(err error) bool { return errorPrefix(err, "MOVED ") }

func isAsk(err error) bool { return errorPrefix(err, "ASK ") }

func isTryAgain(err error) bool { return errorPrefix(err, "TRYAGAIN") }

func errorPrefix(err error, prefix string) bool {
	return err != nil && strings.HasPrefix(err.Error(), prefix)
}

func staleMapError(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, redis.ErrClosed) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	msg := err.Error()
	var re redis.Error
	if errors.As(err, &re) {
		msg = re.Error()
	}
	for _, prefix := range []string{"CLUSTERDOWN", "MOVED ", "ASK ", "TRYAGAIN", "READONLY", "MASTERDOWN", "LOADING"} {
		if strings.HasPrefix(msg, prefix) {
			return true
		}
	}
	return false
}

// replyLen is the number of integers a script answers (see lua/*.lua).
const replyLen = 5
