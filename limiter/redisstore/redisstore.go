// Package redisstore is the Redis limiter.Store: a fleet of processes that
// share one Redis (a single server, a Sentinel-managed primary or a Redis
// Cluster) shares every limit exactly.
//
// Each decision is one Lua script, run atomically by Redis with EVALSHA
// (falling back to EVAL when the server answers NOSCRIPT). A script reads
// the time from Redis itself (TIME), never from the caller, so processes
// whose clocks disagree still share one exact limit. There is one script per
// algorithm, kept in lua/<algorithm>.lua and embedded in the binary.
//
// # Keys
//
// A decision for key k under algorithm a touches
//
//	<prefix>:{<escaped k>}:<a>         the state (a hash; a string for gcra; a sorted set for sliding_log)
//	<prefix>:{<escaped k>}:<a>:seq     sliding_log only: the counter that makes log members unique
//
// and passes every one of them in KEYS: no script computes a key name. The
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
	"strings"
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
}

// Store is a limiter.Store on Redis. It is safe for concurrent use by many
// goroutines; it holds no state of its own besides the client and the
// scripts, so any number of Stores (in any number of processes) on one
// Redis share their limits.
type Store struct {
	client  redis.UniversalClient
	prefix  string
	scripts map[limiter.Algorithm]*redis.Script
}

// New returns a Store deciding on client, which may be a *redis.Client, a
// failover (Sentinel) client or a *redis.ClusterClient. It does not contact
// Redis; scripts are loaded on first use.
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
	s := &Store{client: client, prefix: cfg.Prefix, scripts: make(map[limiter.Algorithm]*redis.Script, len(limiter.Algorithms))}
	for _, a := range limiter.Algorithms {
		src, err := luaFiles.ReadFile("lua/" + string(a) + ".lua")
		if err != nil {
			return nil, fmt.Errorf("redisstore: script for %s: %w", a, err)
		}
		s.scripts[a] = redis.NewScript(string(src))
	}
	return s, nil
}

// Name returns "redis".
func (s *Store) Name() string { return "redis" }

// Keys returns the Redis keys a decision for key under algorithm a touches,
// in the order the script receives them.
func (s *Store) Keys(key string, a limiter.Algorithm) []string {
	base := s.baseKey(key, a)
	if a == limiter.SlidingLog {
		return []string{base, base + ":seq"}
	}
	return []string{base}
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

// Decide implements limiter.Store: one script call, atomic on Redis. It
// validates lim and cost itself before calling Redis. ctx bounds the call
// (on the socket too when the client has ContextTimeoutEnabled).
func (s *Store) Decide(ctx context.Context, key string, lim limiter.Limit, cost int64) (limiter.Decision, error) {
	if err := lim.Validate(); err != nil {
		return limiter.Decision{}, fmt.Errorf("redis store: limit: %w", err)
	}
	if err := lim.CheckCost(cost); err != nil {
		return limiter.Decision{}, fmt.Errorf("redis store: %w", err)
	}
	script := s.scripts[lim.Algorithm]
	keys := s.Keys(key, lim.Algorithm)
	args := scriptArgs(key, lim, cost)
	reply, err := script.Run(ctx, s.client, keys, args...).Result()
	if err != nil {
		return limiter.Decision{}, fmt.Errorf("redis %s script for %s: %w", lim.Algorithm, keys[0], err)
	}
	d, err := decodeReply(reply)
	if err != nil {
		return limiter.Decision{}, fmt.Errorf("redis %s script for %s: %w", lim.Algorithm, keys[0], err)
	}
	d.Limit = lim.Quota()
	return d, nil
}

// scriptArgs are the ARGV of lim's script, as integers (go-redis writes
// them with strconv; no fmt on the decision path). Time is in µs.
func scriptArgs(key string, lim limiter.Limit, cost int64) []any {
	period := int64(lim.Period / time.Microsecond)
	switch lim.Algorithm {
	case limiter.FixedWindow, limiter.SlidingWindow:
		var offset int64
		if !lim.AlignWindows {
			offset = int64(limiter.WindowOffset(key, lim.Period) / time.Microsecond)
		}
		return []any{lim.Rate, period, offset, cost}
	case limiter.SlidingLog:
		return []any{lim.Rate, period, cost}
	case limiter.LeakyBucket:
		var noDelay int64
		if lim.NoDelay {
			noDelay = 1
		}
		return []any{lim.Quota(), lim.Rate, period, cost, noDelay}
	default: // token_bucket, gcra
		return []any{lim.Quota(), lim.Rate, period, cost}
	}
}

// replyLen is the number of integers every script returns: allowed,
// remaining, reset after, retry after, delay (durations in µs).
const replyLen = 5

// decodeReply turns a script's reply into a Decision, checking every
// conversion: a server that answers in another shape gives an error.
func decodeReply(reply any) (limiter.Decision, error) {
	vals, ok := reply.([]any)
	if !ok {
		return limiter.Decision{}, fmt.Errorf("unexpected reply of type %T, want an array of %d integers", reply, replyLen)
	}
	if len(vals) != replyLen {
		return limiter.Decision{}, fmt.Errorf("unexpected reply of %d elements, want %d", len(vals), replyLen)
	}
	var n [replyLen]int64
	for i, v := range vals {
		x, ok := v.(int64)
		if !ok {
			return limiter.Decision{}, fmt.Errorf("unexpected reply element %d of type %T, want an integer", i, v)
		}
		if x < 0 {
			return limiter.Decision{}, fmt.Errorf("unexpected reply element %d: negative value %d", i, x)
		}
		n[i] = x
	}
	if n[0] > 1 {
		return limiter.Decision{}, fmt.Errorf("unexpected reply: allowed flag %d, want 0 or 1", n[0])
	}
	return limiter.Decision{
		Allowed:    n[0] == 1,
		Remaining:  n[1],
		ResetAfter: time.Duration(n[2]) * time.Microsecond,
		RetryAfter: time.Duration(n[3]) * time.Microsecond,
		Delay:      time.Duration(n[4]) * time.Microsecond,
	}, nil
}
