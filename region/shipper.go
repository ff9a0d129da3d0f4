package region

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	"github.com/redis/go-redis/v9/push"

	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
)

// maxInFlight bounds the pipelines on their way to one peer: rounds
// overlap (merges are idempotent), so a slow peer delays nothing else. A
// key stays pending until a round carrying it succeeds, and is carried
// again while the last round failed or once held two sync intervals.
const maxInFlight = 4

// shipPoolSize is large because a go-redis pool stops dialling after
// PoolSize failed dials in a row: a cut of a few seconds must not reach it.
const shipPoolSize = 256

// syncKeyTTL is how long a peer keeps a region's last shipping time.
const syncKeyTTL = time.Hour

// shipper sends the changed slots to every peer: decisions add a key to a
// set (changed); every SyncInterval a round sends each peer one pipeline
// of merge.lua calls and the round's time. Safe for concurrent use.
type shipper struct {
	set      *Set
	interval time.Duration
	timeout  time.Duration
	started  time.Time

	mu     sync.Mutex
	dirty  map[string]struct{}
	merges []localMerge
	closed bool

	peers []*peerShipping
	stop  chan struct{}
	done  chan struct{}
	sends sync.WaitGroup
	once  sync.Once
	begun sync.Once // start, or close of a shipper never started
}

// localMerge is a slot written on a peer, for the local copy.
type localMerge struct {
	hash, field, value string
	ttl                time.Duration
}

// peerShipping is the shipping state of one peer.
type peerShipping struct {
	name string
	// fresh makes a shipping client, again after a failed round, so that
	// one after the peer is back does not wait behind stale dials.
	fresh func() (redis.UniversalClient, func() error)
	// client and close (nil for a client not made here) are guarded by mu.
	client  redis.UniversalClient
	close   func() error
	mu      sync.Mutex
	pending map[string]pendingKey
	round   uint64 // rounds started, numbering pendingKey.dirtied
	flying  int
	failing bool
	heard   time.Time // the newest shipping time of the peer read here
}

// pendingKey is a changed key not yet confirmed shipped to a peer.
type pendingKey struct {
	dirtied uint64    // the round in which it last changed
	sent    time.Time // when a round last took it; zero: in no round
}

func newShipper(s *Set) *shipper {
	sh := &shipper{
		set: s, interval: s.cfg.SyncInterval, timeout: s.cfg.SyncTimeout, started: time.Now(),
		dirty: map[string]struct{}{}, stop: make(chan struct{}), done: make(chan struct{}),
	}
	for _, name := range s.names {
		if name != s.cfg.Local {
			given, timeout := s.cfg.Clients[name], s.cfg.SyncTimeout
			fresh := func() (redis.UniversalClient, func() error) { return shippingClient(given, timeout) }
			c, closeClient := fresh()
			sh.peers = append(sh.peers, &peerShipping{name: name, fresh: fresh, client: c, close: closeClient, pending: map[string]pendingKey{}})
		}
	}
	return sh
}

// start begins the rounds; calling it again does nothing.
func (sh *shipper) start() {
	sh.begun.Do(func() { go sh.loop() })
}

// changed records that hash changed, without waiting on Redis.
func (sh *shipper) changed(hash string) {
	sh.mu.Lock()
	if !sh.closed {
		sh.dirty[hash] = struct{}{}
	}
	sh.mu.Unlock()
}

// mergeLocal queues a slot written on a peer for the local copy.
func (sh *shipper) mergeLocal(hash, field, value string, ttl time.Duration) {
	sh.mu.Lock()
	if !sh.closed {
		sh.merges = append(sh.merges, localMerge{hash: hash, field: field, value: value, ttl: ttl})
	}
	sh.mu.Unlock()
}

func (sh *shipper) loop() {
	defer close(sh.done)
	t := time.NewTicker(sh.interval)
	defer t.Stop()
	for {
		select {
		case <-sh.stop:
			return
		case <-t.C:
			sh.round()
		}
	}
}

// close stops the rounds and makes a last one, once the others are done.
func (sh *shipper) close() {
	sh.once.Do(func() {
		close(sh.stop)
		sh.begun.Do(func() { close(sh.done) }) // never started
		<-sh.done
		sh.sends.Wait()
		sh.round()
		sh.mu.Lock()
		sh.closed = true
		sh.mu.Unlock()
		sh.sends.Wait()
		for _, p := range sh.peers {
			p.mu.Lock()
			if p.close != nil {
				_ = p.close()
			}
			p.mu.Unlock()
		}
	})
}

// shippingClient returns a client of shipping's own, so that a cut-off
// peer exhausts no pool the decisions on it use.
func shippingClient(c redis.UniversalClient, timeout time.Duration) (redis.UniversalClient, func() error) {
	return ownClient(c, shipPoolSize, timeout)
}

// ownClient returns a client with c's options but a pool of at least
// poolSize and dials bounded by dialTimeout (> 0); other kinds of client
// are used as they are (close nil). A Sentinel client's copy goes without
// the fence (fence.go in redisstore), as go-redis's own client was.
func ownClient(c redis.UniversalClient, poolSize int, dialTimeout time.Duration) (redis.UniversalClient, func() error) {
	switch c := c.(type) {
	case *redisstore.FailoverClient:
		return ownClient(c.Client, poolSize, dialTimeout)
	case *redis.Client:
		o := *c.Options()
		ownOptions{&o.PoolSize, &o.MaxConcurrentDials, &o.MinIdleConns, &o.DialTimeout, &o.Dialer,
			&o.PushNotificationProcessor, &o.MaintNotificationsConfig}.tune(poolSize, dialTimeout)
		oc := redis.NewClient(&o)
		return oc, oc.Close
	case *redis.ClusterClient:
		o := *c.Options()
		ownOptions{&o.PoolSize, &o.MaxConcurrentDials, &o.MinIdleConns, &o.DialTimeout, &o.Dialer,
			&o.PushNotificationProcessor, &o.MaintNotificationsConfig}.tune(poolSize, dialTimeout)
		oc := redis.NewClusterClient(&o)
		return oc, oc.Close
	}
	return c, nil
}

// ownOptions points at the fields ownClient changes.
type ownOptions struct {
	poolSize, maxDials, minIdle *int
	dialTimeout                 *time.Duration
	dialer                      *func(ctx context.Context, network, addr string) (net.Conn, error)
	push                        *push.NotificationProcessor
	maint                       **maintnotifications.Config
}

// tune sets the copied options' pool, dials and own settings.
func (o ownOptions) tune(poolSize int, dialTimeout time.Duration) {
	*o.poolSize = max(*o.poolSize, poolSize)
	*o.maxDials = *o.poolSize
	*o.minIdle = 0
	if dialTimeout > 0 {
		*o.dialTimeout = min(*o.dialTimeout, dialTimeout)
		*o.dialer = boundedDialer(*o.dialer, dialTimeout)
	}
	// A second client registering push handlers on c's processor fails.
	*o.push = nil
	if *o.maint != nil {
		mc := **o.maint
		*o.maint = &mc
	}
}

// boundedDialer bounds every dial by timeout: a dial begun while the peer
// was cut off would otherwise hold a round long after the link is back.
// A nil dial is go-redis's default.
func boundedDialer(dial func(ctx context.Context, network, addr string) (net.Conn, error), timeout time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if dial == nil {
		return nil
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return dial(ctx, network, addr)
	}
}

// round hands the changed keys to every peer with room for a pipeline.
func (sh *shipper) round() {
	sh.mu.Lock()
	dirty, merges := sh.dirty, sh.merges
	sh.dirty, sh.merges = map[string]struct{}{}, nil
	sh.mu.Unlock()
	if len(merges) > 0 {
		sh.applyLocal(merges)
		for _, m := range merges {
			dirty[m.hash] = struct{}{}
		}
	}
	for _, p := range sh.peers {
		p.mu.Lock()
		p.round++
		for k := range dirty {
			p.pending[k] = pendingKey{dirtied: p.round}
		}
		if p.flying >= maxInFlight {
			p.mu.Unlock()
			continue
		}
		now := time.Now()
		keys := make([]string, 0, len(p.pending))
		for k, e := range p.pending {
			if e.sent.IsZero() || p.failing || now.Sub(e.sent) > 2*sh.interval {
				keys = append(keys, k)
				e.sent = now
				p.pending[k] = e
			}
		}
		round := p.round
		p.flying++
		p.mu.Unlock()
		sh.sends.Add(1)
		go sh.send(p, keys, round)
	}
}

// applyLocal merges slots written on peers into the local copies; a
// failure is logged (the slot counts at home, and comes back).
func (sh *shipper) applyLocal(merges []localMerge) {
	ctx, cancel := context.WithTimeout(context.Background(), sh.timeout)
	defer cancel()
	calls := make([]mergeCall, len(merges))
	for i, m := range merges {
		calls[i] = mergeCall{hash: m.hash, args: []any{max(m.ttl.Milliseconds(), 1), sh.skew(), m.field, m.value}}
	}
	rejected, err := sh.sendMerges(ctx, sh.set.cfg.Clients[sh.set.cfg.Local], calls, nil)
	if err != nil {
		sh.set.log.Warn("region: merging strict slots into the local Redis failed", "region", sh.set.cfg.Local, "keys", len(merges), "err", err)
	}
	for i, n := range rejected {
		if n > 0 {
			home := strings.TrimPrefix(merges[i].field, "r:"+strictSlot(""))
			sh.set.obs.ObserveRejectedSlots(home, n)
		}
	}
}

// skew is the max skew argument of merge.lua, in µs.
func (sh *shipper) skew() int64 { return sh.set.cfg.MaxClockSkew.Microseconds() }

// mergeCall is one merge.lua call: a key and its arguments.
type mergeCall struct {
	hash string
	args []any
}

// send ships keys' slots to p in one pipeline.
func (sh *shipper) send(p *peerShipping, keys []string, round uint64) {
	defer sh.sends.Done()
	ctx, cancel := context.WithTimeout(context.Background(), sh.timeout)
	defer cancel()
	now := time.Now()
	p.mu.Lock()
	client := p.client
	p.mu.Unlock()
	calls, heard, err := sh.read(ctx, p, keys)
	var rejected []int
	if err == nil {
		rejected, err = sh.sendMerges(ctx, client, calls, func(pipe redis.Pipeliner) {
			pipe.Set(ctx, syncKey(sh.set.cfg.Store.Prefix, sh.set.cfg.Local), now.UnixMicro(), syncKeyTTL)
		})
	}
	if n := sum(rejected); n > 0 {
		sh.set.obs.ObserveRejectedSlots(p.name, n)
	}
	var closeOld func() error
	p.mu.Lock()
	p.flying--
	// Rounds overlap: an old one must not report its older reading.
	if heard.After(p.heard) {
		p.heard = heard
	}
	lag := time.Since(sh.started)
	if !p.heard.IsZero() {
		lag = max(time.Since(p.heard), 0)
	}
	for _, k := range keys {
		e, ok := p.pending[k]
		switch {
		case !ok:
		case err == nil && e.dirtied <= round:
			delete(p.pending, k) // shipped as it is now
		case err != nil && !e.sent.IsZero():
			e.sent = time.Time{} // the next round carries it
			p.pending[k] = e
		}
	}
	if err != nil {
		if p.client == client && p.close != nil {
			closeOld = p.close
			p.client, p.close = p.fresh()
		}
	}
	logChange := (err != nil) != p.failing
	p.failing = err != nil
	p.mu.Unlock()
	if closeOld != nil {
		_ = closeOld()
	}
	if logChange {
		if err != nil {
			sh.set.log.Warn("region: shipping to a peer failed; its counts are kept and sent again", "peer", p.name, "keys", len(keys), "err", err)
		} else {
			sh.set.log.Info("region: shipping to a peer works again", "peer", p.name)
		}
	}
	if err != nil {
		err = fmt.Errorf("ship %d keys to region %s: %w", len(keys), p.name, err)
	}
	sh.set.obs.ObserveSync(p.name, lag, err)
}

// read gets keys' slots as merge calls for p (but those p writes) and the
// time of p's last shipping here.
func (sh *shipper) read(ctx context.Context, p *peerShipping, keys []string) ([]mergeCall, time.Time, error) {
	local := sh.set.cfg.Clients[sh.set.cfg.Local]
	pipe := local.Pipeline()
	heardCmd := pipe.Get(ctx, syncKey(sh.set.cfg.Store.Prefix, p.name))
	all := make([]*redis.MapStringStringCmd, len(keys))
	ttls := make([]*redis.DurationCmd, len(keys))
	for i, k := range keys {
		all[i] = pipe.HGetAll(ctx, k)
		ttls[i] = pipe.PTTL(ctx, k)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, time.Time{}, fmt.Errorf("read from the local Redis: %w", err)
	}
	var heard time.Time
	if us, err := strconv.ParseInt(heardCmd.Val(), 10, 64); err == nil {
		heard = time.UnixMicro(us)
	}
	own, ownStrict := "r:"+p.name, "r:"+strictSlot(p.name)
	calls := make([]mergeCall, 0, len(keys))
	for i, k := range keys {
		fields := all[i].Val()
		ttl := ttls[i].Val()
		if len(fields) == 0 || ttl <= 0 {
			continue // expired meanwhile: nothing left to ship
		}
		args := []any{max(ttl.Milliseconds(), 1), sh.skew()}
		for f, v := range fields {
			if strings.HasPrefix(f, "r:") && f != own && f != ownStrict {
				args = append(args, f, v)
			}
		}
		if len(args) > 2 {
			calls = append(calls, mergeCall{hash: k, args: args})
		}
	}
	return calls, heard, nil
}

// sendMerges sends calls to c in one pipeline after extra (again, with
// EVAL, after NOSCRIPT: redisstore.Script.RunPipelined) and returns the slots each ignored as too far ahead.
func (sh *shipper) sendMerges(ctx context.Context, c redis.UniversalClient, calls []mergeCall, extra func(redis.Pipeliner)) ([]int, error) {
	run := make([]redisstore.ScriptCall, len(calls))
	for i, m := range calls {
		run[i] = redisstore.ScriptCall{Keys: []string{m.hash}, Args: m.args}
	}
	cmds, err := sh.set.scripts.merge.RunPipelined(ctx, c, extra, run)
	rejected := make([]int, len(calls))
	for i, cmd := range cmds {
		if r, rerr := cmd.Int64Slice(); rerr == nil && len(r) == 2 {
			rejected[i] = int(r[1])
		}
	}
	return rejected, err
}

// sum is the sum of ns.
func sum(ns []int) int {
	total := 0
	for _, n := range ns {
		total += n
	}
	return total
}

// syncKey holds the time (µs) of from's last shipping that reached here.
func syncKey(prefix, from string) string {
	if prefix == "" {
		prefix = redisstore.DefaultPrefix
	}
	return prefix + ":regions:sync:" + from
}
