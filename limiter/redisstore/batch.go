package redisstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// Defaults of BatchConfig.
const (
	// DefaultBatchMaxSize is the default cap on decisions per script call.
	DefaultBatchMaxSize = 128
	// DefaultBatchSenders is the default number of batches on their way
	// to Redis at once.
	DefaultBatchSenders = 2
)

// senderIdle is how long a sender goroutine waits for work before it
// exits; the next decision starts one again.
const senderIdle = 2 * time.Second

// BatchConfig says how concurrent decisions share script calls. The zero
// value is the default: batching on.
//
// A decision made while no other is in progress goes to Redis at once, as
// its own call, on the caller's goroutine: batching adds no latency when
// there is nothing to batch. Decisions that arrive while others are in
// progress are queued (on a Cluster, in a queue per master node, the one
// holding the decision's slot); each of up to Senders sender goroutines
// (per queue) takes everything queued (up to MaxSize), groups it by
// algorithm (and, on a Cluster, by hash slot), sends each group as one call
// of a batch script (the groups of one batch in one pipeline) and hands
// every decision its answer. There is no timer: a batch holds what arrived while the previous
// ones were on their way. A script runs atomically, so every decision in a
// batch is as atomic as when made alone, and the batch script makes each
// exactly as the single script would (one Redis TIME per call).
type BatchConfig struct {
	// Disabled makes every decision its own script call.
	Disabled bool
	// MaxSize caps the decisions in one batch. Default DefaultBatchMaxSize.
	MaxSize int
	// Senders is the number of batches on their way to Redis at once.
	// Default DefaultBatchSenders.
	Senders int
}

// request is one decision on its way: its keys and arguments, and, once
// made, its answer. Requests are pooled; one whose caller gave up waiting
// (deadline, cancellation) is left to the garbage collector, because a
// sender may still write its answer.
type request struct {
	alg   int
	key   string // the state key
	seq   string // sliding_log's sequence key
	args  [6]int64
	nargs int
	limit int64 // the quota, Decision.Limit
	cost  int64
	mode  limiter.Mode
	slot  int // Cluster hash slot

	ctx      context.Context
	deadline time.Time // zero: none besides ctx's

	done  chan struct{} // receives once the answer is set
	timer *time.Timer   // the caller's deadline, reused
	d     limiter.Decision
	err   error

	// argv, raw and ints are reused buffers of the direct path.
	argv [12]any
	raw  bytes.Buffer
	ints []int64
}

// answer completes the decision decoded from r's reply: the quota, and
// the units admitted, checked against the cost (none for a peek).
func (r *request) answer(d limiter.Decision, err error) (limiter.Decision, error) {
	if err != nil {
		return limiter.Decision{}, err
	}
	if d.Admitted > r.cost || (r.mode == limiter.ModeConsume && d.Allowed && d.Admitted != r.cost) {
		return limiter.Decision{}, fmt.Errorf("unexpected reply: %d units admitted for a cost of %d", d.Admitted, r.cost)
	}
	d.Limit = r.limit
	if r.mode == limiter.ModePeek {
		d.Admitted = 0
	}
	return d, nil
}

// reset clears r's per-decision fields for reuse.
func (r *request) reset() {
	r.key, r.seq, r.ctx, r.err = "", "", nil, nil
	r.deadline = time.Time{}
	r.d = limiter.Decision{}
}

// cmdArgs is the command of a single-script call for r, with two slots
// left for the command name and the SHA. Pointers box without allocating.
func (r *request) cmdArgs(nkeys int) []any {
	a := r.argv[:0]
	a = append(a, nil, nil, nkeys, &r.key)
	if nkeys == 2 {
		a = append(a, &r.seq)
	}
	for i := 0; i < r.nargs; i++ {
		a = append(a, &r.args[i])
	}
	return a
}

// batcher queues decisions and runs the senders. On a single server (or
// Sentinel) it has one lane; on a Cluster one lane per master node, so
// that a node that does not answer holds up only the decisions for its
// own slots.
type batcher struct {
	s       *Store
	maxSize int
	senders int32
	// one is the only lane when the store is not on a Cluster.
	one *lane
	// lanes are a Cluster's lanes by node client (*redis.Client → *lane;
	// go-redis keeps one client per node address).
	lanes sync.Map
	// routed is set once the Cluster client has a slot map.
	routed atomic.Bool
	// trace, when set, links each batch to its decisions' traces.
	trace BatchTracer
	// batched counts the decisions sent together with others (in one
	// script call or one pipeline).
	batched atomic.Int64
}

// lane is a queue of decisions bound for one Redis node and the senders
// that empty it.
type lane struct {
	b       *batcher
	queue   chan *request
	running atomic.Int32
	// node is a Cluster master's own client: batches go to it directly,
	// and a group it redirects (MOVED, ASK) is sent again through the
	// cluster client. Nil: batches go through the store's client.
	node *redis.Client
}

func newBatcher(s *Store, cfg BatchConfig, trace BatchTracer) *batcher {
	if cfg.MaxSize <= 0 {
		cfg.MaxSize = DefaultBatchMaxSize
	}
	if cfg.Senders <= 0 {
		cfg.Senders = DefaultBatchSenders
	}
	b := &batcher{s: s, maxSize: cfg.MaxSize, senders: int32(cfg.Senders), trace: trace}
	if !s.cluster {
		b.one = b.newLane()
	}
	return b
}

func (b *batcher) newLane() *lane {
	return &lane{b: b, queue: make(chan *request, 4*b.maxSize*int(b.senders))}
}

// laneFor returns the lane of the node that holds r's slot in the
// client's current slot map. Before the client has a map, finding the
// node loads one, bounded by r's deadline.
func (b *batcher) laneFor(ctx context.Context, r *request) (*lane, error) {
	if b.one != nil {
		return b.one, nil
	}
	if !b.routed.Load() && !r.deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, r.deadline)
		defer cancel()
	}
	node, err := b.s.cc.MasterForKey(ctx, r.key)
	if err != nil {
		b.s.noteError(err)
		return nil, err
	}
	if !b.routed.Load() {
		b.routed.Store(true)
	}
	if l, ok := b.lanes.Load(node); ok {
		return l.(*lane), nil
	}
	nl := b.newLane()
	nl.node = node
	l, _ := b.lanes.LoadOrStore(node, nl)
	return l.(*lane), nil
}

// errDeadline is returned when a decision's timeout passes while it waits.
var errDeadline = context.DeadlineExceeded

// do queues r on its node's lane and waits for its answer, its deadline
// or the end of ctx, whichever comes first. It reports whether r is free
// to reuse: not when the caller gave up, since a sender may still answer
// it.
func (b *batcher) do(ctx context.Context, r *request, timeout time.Duration) (limiter.Decision, error, bool) {
	r.ctx = ctx
	var expired <-chan time.Time
	if timeout > 0 {
		r.deadline = time.Now().Add(timeout)
		if dl, ok := ctx.Deadline(); ok && dl.Before(r.deadline) {
			r.deadline = dl // ctx.Done ends the wait
		} else {
			if r.timer == nil {
				r.timer = time.NewTimer(timeout)
			} else {
				r.timer.Reset(timeout)
			}
			expired = r.timer.C
		}
	} else if dl, ok := ctx.Deadline(); ok {
		r.deadline = dl
	}
	ln, err := b.laneFor(ctx, r)
	if err != nil {
		if expired != nil {
			r.timer.Stop()
		}
		return limiter.Decision{}, err, true
	}
	select {
	case ln.queue <- r:
	default:
		select {
		case ln.queue <- r:
		case <-ctx.Done():
			if expired != nil {
				r.timer.Stop()
			}
			return limiter.Decision{}, ctx.Err(), true
		case <-expired:
			return limiter.Decision{}, errDeadline, true
		}
	}
	ln.wake()

	select {
	case <-r.done:
		if expired != nil {
			r.timer.Stop()
		}
		return r.d, r.err, true
	case <-ctx.Done():
		if expired != nil {
			r.timer.Stop()
		}
		return limiter.Decision{}, ctx.Err(), false
	case <-expired:
		return limiter.Decision{}, errDeadline, false
	}
}

// wake starts a sender when fewer than the configured number run.
func (ln *lane) wake() {
	for {
		n := ln.running.Load()
		if n >= ln.b.senders {
			return
		}
		if ln.running.CompareAndSwap(n, n+1) {
			go ln.send()
			return
		}
	}
}

// send is one sender goroutine: it takes what is queued, sends it and
// delivers the answers, until it has had nothing to do for senderIdle.
func (ln *lane) send() {
	b := ln.b
	sd := newSender(b)
	sd.node = ln.node
	idle := time.NewTimer(senderIdle)
	defer idle.Stop()
	for {
		var first *request
		select {
		case first = <-ln.queue:
		default:
			idle.Reset(senderIdle)
			select {
			case first = <-ln.queue:
				idle.Stop()
			case <-idle.C:
				ln.running.Add(-1)
				// A decision queued just before the count went down would
				// wait for the next one: take it on after all.
				if len(ln.queue) > 0 && ln.running.Add(1) <= b.senders {
					continue
				}
				sd.conn.close()
				return
			}
		}
		batch := append(sd.batch[:0], first)
	drain:
		for len(batch) < b.maxSize {
			select {
			case r := <-ln.queue:
				batch = append(batch, r)
			default:
				break drain
			}
		}
		sd.batch = batch
		sd.flush(batch)
		clear(sd.batch) // drop references to delivered requests
	}
}

// sender is the reusable state of one sender goroutine.
type sender struct {
	b      *batcher
	node   *redis.Client // the lane's Cluster master, or nil
	conn   ownConn
	via    processor // what the current batch goes through
	batch  []*request
	groups []group
	byKey  map[int]int // group index by algorithm and slot
	args   []any
	ints   []int64
	traced []context.Context // the members' contexts, for BatchTracer
}

// group is the decisions of one batch that go in one script call.
type group struct {
	alg     int
	numKeys int64
	members []*request
	cmd     redis.Cmder
	args    []any
	raw     *bytes.Buffer // the raw reply on a single server, reused
}

func newSender(b *batcher) *sender {
	sd := &sender{b: b, byKey: make(map[int]int)}
	sd.conn.client, _ = b.s.client.(*redis.Client)
	return sd
}

// deliver hands r its answer.
func deliver(r *request, d limiter.Decision, err error) {
	r.d, r.err = d, err
	r.done <- struct{}{}
}

// flush sends one batch and delivers every answer.
func (sd *sender) flush(batch []*request) {
	s := sd.b.s
	now := time.Now()
	var latest time.Time
	noDeadline := false
	live := batch[:0]
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			deliver(r, limiter.Decision{}, err)
			continue
		}
		if r.deadline.IsZero() {
			noDeadline = true
		} else if !now.Before(r.deadline) {
			deliver(r, limiter.Decision{}, errDeadline)
			continue
		} else if r.deadline.After(latest) {
			latest = r.deadline
		}
		live = append(live, r)
	}
	if len(live) == 0 {
		return
	}
	// The call lasts until the last member's deadline: each member stops
	// waiting at its own.
	ctx := context.Background()
	if !noDeadline {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, latest)
		defer cancel()
	}
	if sd.b.trace != nil {
		sd.traced = sd.traced[:0]
		for _, r := range live {
			sd.traced = append(sd.traced, r.ctx)
		}
		var end func()
		ctx, end = sd.b.trace.TraceBatch(ctx, sd.traced)
		clear(sd.traced)
		if end != nil {
			defer end()
		}
	}

	// Group by algorithm and, on a Cluster, by slot.
	sd.groups = sd.groups[:0]
	clear(sd.byKey)
	for _, r := range live {
		k := r.alg
		if s.cluster {
			k = r.alg*clusterSlots + r.slot
		}
		gi, ok := sd.byKey[k]
		if !ok {
			gi = len(sd.groups)
			sd.byKey[k] = gi
			if gi < cap(sd.groups) {
				sd.groups = sd.groups[:gi+1]
				sd.groups[gi].alg, sd.groups[gi].members = r.alg, sd.groups[gi].members[:0]
			} else {
				sd.groups = append(sd.groups, group{alg: r.alg, raw: new(bytes.Buffer)})
			}
		}
		sd.groups[gi].members = append(sd.groups[gi].members, r)
	}

	// Build each group's command: EVALSHA sha numkeys keys... args...
	sd.args = sd.args[:0]
	for gi := range sd.groups {
		g := &sd.groups[gi]
		sc := &s.algs[g.alg]
		start := len(sd.args)
		g.numKeys = int64(len(g.members) * sc.nkeys)
		sd.args = append(sd.args, "evalsha", sc.batch.shaArg, &g.numKeys)
		for _, r := range g.members {
			sd.args = append(sd.args, &r.key)
			if sc.nkeys == 2 {
				sd.args = append(sd.args, &r.seq)
			}
		}
		for _, r := range g.members {
			for i := 0; i < r.nargs; i++ {
				sd.args = append(sd.args, &r.args[i])
			}
		}
		g.args = sd.args[start:len(sd.args):len(sd.args)]
	}
	// On a single server the batch goes through the sender's own
	// connection.
	conn := sd.conn.take()
	sd.via = s.client
	if conn != nil {
		sd.via = conn
	} else if sd.node != nil {
		sd.via = sd.node
	}
	sd.exec(ctx)
	if len(live) > 1 {
		sd.b.batched.Add(int64(len(live)))
	}
	var failed error
	for gi := range sd.groups {
		g := &sd.groups[gi]
		if err := sd.deliverGroup(ctx, g); err != nil {
			failed = err
		}
		clear(g.members)
		g.cmd, g.args = nil, nil
	}
	if failed != nil {
		s.noteError(failed)
	}
	sd.conn.give(conn, failed)
	sd.via = nil
	clear(sd.args)
}

// newCmd is g's script command: raw on a single server, typed on a
// Cluster (see Store.call).
func (sd *sender) newCmd(ctx context.Context, g *group) redis.Cmder {
	if sd.b.s.cluster {
		c := redis.NewCmd(ctx, g.args...)
		c.SetFirstKeyPos(3)
		return scriptCmd{c}
	}
	g.raw.Reset()
	c := redis.NewRawWriteToCmd(ctx, g.raw, g.args...)
	c.SetFirstKeyPos(3)
	return c
}

// exec sends every group's command: one call when there is one group, a
// pipeline otherwise (on a Cluster, go-redis sends one pipeline per node).
func (sd *sender) exec(ctx context.Context) {
	for gi := range sd.groups {
		sd.groups[gi].cmd = sd.newCmd(ctx, &sd.groups[gi])
	}
	if len(sd.groups) == 1 {
		_ = sd.via.Process(ctx, sd.groups[0].cmd)
		return
	}
	pipe := sd.via.Pipeline()
	for gi := range sd.groups {
		_ = pipe.Process(ctx, sd.groups[gi].cmd)
	}
	_, _ = pipe.Exec(ctx)
}

// replyInts reads a group's reply into sd.ints.
func (sd *sender) replyInts(g *group) error {
	var err error
	switch c := g.cmd.(type) {
	case *redis.RawWriteToCmd:
		if cerr := c.Err(); cerr != nil {
			return cerr
		}
		sd.ints, err = parseInts(g.raw.Bytes(), sd.ints)
	case scriptCmd:
		if cerr := c.Err(); cerr != nil {
			return cerr
		}
		sd.ints, err = anyInts(c.Val(), sd.ints)
	default:
		err = errors.New("unexpected command type")
	}
	return err
}

// deliverGroup decodes a group's reply and hands each member its answer.
// A group whose script Redis did not hold is sent again with EVAL. It
// returns the group's error, if any.
func (sd *sender) deliverGroup(ctx context.Context, g *group) error {
	err := sd.replyInts(g)
	if sd.node != nil && isRedirect(err) {
		// The slot moved (or is moving): the cluster client follows the
		// redirection, and the slot map is reloaded.
		s := sd.b.s
		s.noteError(err)
		sd.ints, err = s.run(ctx, s.client, &s.algs[g.alg].batch, g.args, g.raw, sd.ints)
	}
	if isNoScript(err) {
		sc := &sd.b.s.algs[g.alg]
		g.args[0], g.args[1] = "eval", sc.batch.srcArg
		sd.ints, err = sd.b.s.call(ctx, sd.via, g.args, g.raw, sd.ints)
	}
	if err == nil && len(sd.ints) != replyLen*len(g.members) {
		err = errors.New("unexpected batch reply length")
	}

	for i, r := range g.members {
		if err != nil {
			deliver(r, limiter.Decision{}, err)
			continue
		}
		d, derr := r.answer(decodeInts(sd.ints[i*replyLen : (i+1)*replyLen]))
		deliver(r, d, derr)
	}
	return err
}
