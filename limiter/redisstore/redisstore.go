// Package redisstore is the Redis limiter.Store: a fleet of processes that
// share one Redis (a single server, a Sentinel-managed primary or a Redis
// Cluster) shares every limit exactly.
//
// Each decision is made by a Lua script, run atomically by Redis with
// EVALSHA (falling back to EVAL when the server answers NOSCRIPT). A script
// reads the time from Redis itself (TIME), never from the caller, so
// processes whose clocks disagree still share one exact limit. There is one
// script per algorithm of limiter's table (limiter.AlgorithmSpecs),
// assembled when the store is made from lua/preamble.lua (shared helpers),
// lua/<algorithm>.lua (the decision) and lua/run.lua (the mode), all
// embedded in the binary; the table says which keys and arguments each
// script receives (AlgorithmSpec.KeySuffixes, AlgorithmSpec.Params).
//
// # Peek, at most, reset
//
// The same script makes every kind of decision (limiter.Mode, its last
// argument): a peek answers for the cost and writes nothing (redis_rate's
// AllowN with n = 0); an at-most decision that does not fit runs the
// decision again, inside the same call, with the units that fit (the
// rejection's remaining), so concurrent AllowAtMost calls never admit more
// than the limit between them. Reset is one DEL of the algorithm's keys.
//
// # Batching
//
// A decision made while no other is in progress is one call of its
// algorithm's script. Decisions that arrive while others are on their way
// travel together: grouped by algorithm (and Cluster slot), each group is
// one call of a batch script assembled from the same pieces as the single
// script (the decision called once per decision in order, with one TIME
// per call), and the groups of a batch share one pipeline. Each
// decision is as atomic as alone and gets its own answer; see BatchConfig.
// The decisions of a call that share a key read it from Redis once and
// write it once, at the end of the call, with the state and expiry the
// last of them left (lua/batch.lua): a hot key costs one read and one
// write per call instead of per decision.
// Batching turns many script calls, whose fixed cost on the server is what
// limits one-call-per-decision limiters, into few. On a Cluster each master
// node has a queue and senders of its own, so a batch holds decisions for
// one node only and is answered as soon as that node replies.
//
// # Cluster failover
//
// When a Cluster master dies, only the decisions for its slots fail: they
// wait in its node's queue, fail at once when the connection is refused
// (dialled once by default, see ClientConfig.DialAttempts), and are never
// sent again after a network error (a decision is not idempotent).
// go-redis reloads its slot map on its own only on MOVED or ASK and
// every ClientConfig.ClusterReloadInterval; the store also reloads it as
// soon as a call fails in a way a stale map explains (refused, broken or
// timed-out connections, CLUSTERDOWN, READONLY ...), at most once per
// Config.ClusterRefreshMinInterval, so decisions reach a promoted replica
// within moments of its promotion.
//
// While a slot migrates, a batch call whose keys are split between the
// two masters is answered TRYAGAIN (and one whose keys moved, ASK): Redis
// ran nothing, so the group's decisions are sent again one call each,
// following ASK, and a call answered TRYAGAIN is sent again after a short
// backoff within the decision's deadline (sender.singly).
//
// # Keys
//
// A decision for key k under algorithm a touches
//
//	<prefix>:{<escaped k>}:<a>         the state (a hash; a string for gcra; a sorted set for sliding_log)
//	<prefix>:{<escaped k>}:<a>:seq     sliding_log only: the counter that makes log members unique
//
// (the base key with each of a's AlgorithmSpec.KeySuffixes) and passes every one of them in KEYS: no script computes a key name. The
// braces make the escaped key the hash tag, so all keys of one decision live
// in one Redis Cluster slot. The escaping replaces '%' by "%25", '{' by
// "%7B" and '}' by "%7D" (and the empty key by "%00"), so a key containing
// braces can neither move to another slot nor collide with another key.
// Keys expire on their own (PEXPIRE on every write) once their state is
// that of a fresh key: a fixed window at its end, a sliding window two
// periods after the last admission, a log one period after it, a bucket when
// full (token_bucket, gcra) or empty (leaky_bucket) again.
//
// # Timeouts
//
// The Limiter gives each call a deadline (100 ms by default). go-redis only
// applies a context deadline to the socket when the client has
// ContextTimeoutEnabled; ClientConfig.NewClient sets it. With a client built
// otherwise, a stalled Redis can hold a decision for the client's
// ReadTimeout instead.
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
	// Prefix is the first component of every key the store writes, so that
	// several applications can share one Redis. Default DefaultPrefix. It
	// must not contain '{' or '}', which would change the hash slot.
	Prefix string
	// Batch says how concurrent decisions share script calls. The zero
	// value batches (see BatchConfig).
	Batch BatchConfig
	// ClusterRefreshMinInterval is, on a Redis Cluster, the shortest time
	// between two reloads of the slot map that a failed call asks for (see
	// Store). Default DefaultClusterRefreshMinInterval; negative: never
	// reload on an error (go-redis still reloads on MOVED and periodically).
	ClusterRefreshMinInterval time.Duration
	// BatchTracer, when set, is told of every batch of decisions sent to
	// Redis; see BatchTracer. Nil: batches carry no trace context.
	BatchTracer BatchTracer
	// Durability says whether a decision waits for a replica to hold
	// its write; see Durability. Default DurabilityNone.
	Durability Durability
	// DurabilityTimeout bounds the wait of DurabilityWait. Default
	// DefaultDurabilityTimeout.
	DurabilityTimeout time.Duration
	// ReplicationObserver, when set, is told of the writes no replica
	// acknowledged within DurabilityTimeout (DurabilityWait only).
	ReplicationObserver ReplicationObserver
}

// Durability says what a decision waits for before it is answered.
type Durability uint8

const (
	// DurabilityNone answers a decision as soon as the primary ran its
	// script. Redis replicates asynchronously: a write the primary
	// accepted but had not yet sent to a replica is lost when that
	// replica is promoted (a Sentinel failover, manual or not), and so
	// is every write the old primary accepts until the clients switch.
	DurabilityNone Durability = iota
	// DurabilityWait sends WAIT 1 <DurabilityTimeout> after each
	// script call, on the same connection (in the same pipeline, so it
	// costs no round trip of its own, only the wait for the replica's
	// acknowledgement): a decision is answered once at least one replica
	// holds its write, or once the timeout passes. A write no replica
	// acknowledged in time still counts (the primary ran the script; the
	// decision is not undone) and is reported to the
	// ReplicationObserver. On a single server or Sentinel only: on a
	// Cluster WAIT would have to follow each redirection, and New
	// refuses it.
	DurabilityWait
)

// DefaultDurabilityTimeout is the default of Config.DurabilityTimeout:
// half the Limiter's default decision timeout (100 ms), so that a
// decision whose replica lags still has the other half for its own round
// trip, and far longer than a healthy replica's acknowledgement (one
// round trip between primary and replica, under a millisecond on one
// network).
const DefaultDurabilityTimeout = 50 * time.Millisecond

// ReplicationObserver is told of the decisions' writes that no replica
// acknowledged within Config.DurabilityTimeout. The store calls it from
// its senders and from the deciding goroutines, concurrently; it must be
// cheap.
type ReplicationObserver interface {
	// ObserveUnreplicated reports n decisions whose writes no replica
	// acknowledged in time (err: the WAIT's own error, nil when it
	// answered 0 replicas).
	ObserveUnreplicated(n int, err error)
}

// DefaultClusterRefreshMinInterval is the default of
// Config.ClusterRefreshMinInterval.
const DefaultClusterRefreshMinInterval = 100 * time.Millisecond

// BatchTracer links batches of decisions to the decisions' traces:
// batched calls run on a context of their own, not on any one caller's.
// The store calls it from its sender goroutines, concurrently.
type BatchTracer interface {
	// TraceBatch is called before a batch is sent. batch is the context
	// the batch's Redis calls would run with (a background context bounded
	// by the latest member's deadline); decisions are the contexts the
	// members' callers passed to Decide, in the batch's order. It returns
	// the context to run the calls with instead (typically batch carrying
	// a span that links every decision's span, or the only decision's span
	// as parent) and a function called once the batch's answers are
	// delivered, which may be nil. It must not keep decisions, whose
	// backing array is reused.
	TraceBatch(batch context.Context, decisions []context.Context) (context.Context, func())
}

// Store is a limiter.Store on Redis. It is safe for concurrent use by many
// goroutines; it holds no state of its own besides the client, the scripts
// and the decisions waiting to be sent, so any number of Stores (in any
// number of processes) on one Redis share their limits.
type Store struct {
	client  redis.UniversalClient
	cluster bool
	cc      *redis.ClusterClient // the client, on a Cluster
	// refreshMin and lastRefresh rate-limit the slot map reloads asked
	// for by failed calls on a Cluster (Unix ns of the last one).
	refreshMin  time.Duration
	lastRefresh atomic.Int64
	prefix      string
	algs        [limiter.NumAlgorithms]algScripts // by AlgorithmSpec.Index
	// batch queues and sends the decisions made while others are in
	// progress; nil without batching (see batch.go).
	batch *batcher
	// direct1 is the connection of decisions made alone.
	direct1  ownConn
	requests sync.Pool
	// wait is the WAIT sent after each script call (DurabilityWait), nil
	// otherwise; unreplicated counts the writes it found unacknowledged.
	wait         []any
	replObs      ReplicationObserver
	unreplicated atomic.Int64
}

// New returns a Store deciding on client, which may be a *redis.Client, a
// failover (Sentinel) client or a *redis.ClusterClient. It does not contact
// Redis; scripts are loaded on first use. Batching applies to
// *redis.Client (single server and Sentinel) and *redis.ClusterClient; with
// any other client each decision is its own call.
func New(client redis.UniversalClient, cfg Config) (*Store, error) {
	if client == nil {
		return nil, errors.New("redisstore: client is required")
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
	s := &Store{client: client, prefix: cfg.Prefix, algs: algs}
	s.requests.New = func() any { return &request{done: make(chan struct{}, 1)} }
	s.cc, s.cluster = client.(*redis.ClusterClient)
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
		s.wait = []any{"wait", 1, cfg.DurabilityTimeout.Milliseconds()}
		s.replObs = cfg.ReplicationObserver
	default:
		return nil, fmt.Errorf("redisstore: unknown durability %d", cfg.Durability)
	}
	c, single := client.(*redis.Client)
	if single {
		s.direct1.client = c
	}
	if !cfg.Batch.Disabled && (s.cluster || single) {
		s.batch = newBatcher(s, cfg.Batch, cfg.BatchTracer)
	}
	return s, nil
}

// Name returns "redis".
func (s *Store) Name() string { return "redis" }

// Warm readies Redis for the store's first decisions: it loads the
// store's scripts (SCRIPT LOAD, pipelined) and, at the same time, opens
// as many connections as the store's decisions hold at once (one per
// batch sender, and one for a decision made alone), which go back to the
// client's pool; on a Cluster it does so on every master. Without it a
// first decision dials (go-redis greets a new connection in one more
// round trip), finds its script missing (NOSCRIPT) and sends it: several
// round trips, which on a distant Redis (another region's) outlast the
// decision's timeout. A store that was not warmed, or whose Redis lost
// its scripts since, works as before. Safe for concurrent use.
func (s *Store) Warm(ctx context.Context) error {
	conns := 1
	if s.batch != nil {
		conns += int(s.batch.senders)
	}
	warm := func(ctx context.Context, c redis.Cmdable) error {
		// Each call on a connection of its own, held until all are done,
		// then given back to the pool.
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

// Shard names the part of Redis that decides for key: on a Cluster, the
// address of the master holding key's slot in the client's current slot
// map (every algorithm's state of one key is in that slot); "" on a single
// server or Sentinel, where one server decides everything, and on a
// Cluster whose slot map cannot be loaded. A circuit breaker kept per
// shard opens for a dead master's keys alone. Safe for concurrent use.
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

// Masters reloads a Cluster's slot map and returns the addresses of its
// masters, the names Shard gives; nil on a single server or Sentinel. When
// the reload fails (no node answered) it returns the masters of the map
// the client has. Safe for concurrent use.
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

// Keys returns the Redis keys a decision for key under algorithm a touches,
// in the order the script receives them: the base key with each of a's
// limiter.AlgorithmSpec.KeySuffixes (the base key alone for an unknown
// algorithm).
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

// baseKey is <prefix>:{<escaped key>}:<algorithm>.
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

// writeEscaped writes key with '%', '{' and '}' percent-encoded, and the
// empty key as "%00", which no other key produces (a '%' from the input is
// always followed by "25", "7B" or "7D"). The result is never empty, so
// the hash tag around it is never "{}" (which Redis Cluster would ignore).
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

// Reset implements limiter.Inspector: one DEL of every key lim's algorithm
// keeps for key (they share a hash slot, so this works on a Cluster too).
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

// Unreplicated is how many decisions' writes no replica acknowledged
// within Config.DurabilityTimeout so far (DurabilityWait; 0 otherwise).
// Safe for concurrent use.
func (s *Store) Unreplicated() int64 { return s.unreplicated.Load() }

// scriptCmd is a script command on a Cluster: go-redis follows its MOVED
// and ASK redirections but never sends it again after a network error. A
// decision is not idempotent: a script whose reply was lost may have run,
// and running it again would count the request twice.
type scriptCmd struct{ *redis.Cmd }

// NoRetry tells go-redis not to send the command again after a failure.
func (scriptCmd) NoRetry() bool { return true }

// noteError asks a Cluster client to reload its slot map, at most once
// per refreshMin, after a call failed in a way that says the map may be
// stale: the node could not be reached or did not answer in time, the
// connection broke, or the node answered that the cluster is down, the
// slot moved, or it is not (or no longer) a writable master. go-redis on
// its own reloads only on MOVED and ASK and every
// ClientConfig.ClusterReloadInterval, so after a master dies its slots
// would keep pointing at the dead address until then. The reload runs in
// the background (go-redis's ReloadState) and asks the nodes in random
// order, skipping those it cannot reach.
func (s *Store) noteError(err error) {
	if !s.cluster || s.refreshMin < 0 || !staleMapError(err) {
		return
	}
	now := time.Now().UnixNano()
	last := s.lastRefresh.Load()
	if now-last < int64(s.refreshMin) || !s.lastRefresh.CompareAndSwap(last, now) {
		return
	}
	s.cc.ReloadState(context.Background())
}

// isMoved reports whether err is a Cluster MOVED redirection: the slot
// is served by another master now.
func isMoved(err error) bool { return errorPrefix(err, "MOVED ") }

// isAsk reports whether err is a Cluster ASK redirection: the slot is
// migrating and the keys asked for are on the importing master.
func isAsk(err error) bool { return errorPrefix(err, "ASK ") }

// isTryAgain reports whether err is a Cluster TRYAGAIN: the slot is
// migrating and a command's keys are split between the two masters (or
// not all on the importing one yet). Redis ran nothing.
func isTryAgain(err error) bool { return errorPrefix(err, "TRYAGAIN") }

// errorPrefix reports whether err's message starts with prefix.
func errorPrefix(err error, prefix string) bool {
	return err != nil && strings.HasPrefix(err.Error(), prefix)
}

// staleMapError reports whether err from a Cluster call may come from a
// stale slot map (see noteError). A caller's own cancellation does not.
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
	// An error reply, as go-redis hands it over (typed or not).
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

// replyLen is the number of integers every script returns: units
// admitted (0: rejected), remaining, reset after, retry after, delay
// (durations in µs).
const replyLen = 5
