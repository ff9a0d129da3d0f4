package redisstore

// How a decision reaches Redis, top to bottom in this file:
//
//  1. Store.decide refuses a call that would corrupt the shared state
//     (checkCall), takes a request from the store's pool and fills in its
//     keys and script arguments (Store.fill).
//  2. Store.send chooses the way. A decision made while no other is in
//     progress (or on a store without batching) is sent at once, on the
//     caller's goroutine, as one call of its algorithm's single script
//     (Store.direct): batching adds no latency when there is nothing to
//     batch with. Any other decision joins a batch (batcher.wait).
//  3. batcher.wait queues the request on the lane of the Redis node that
//     holds its key (one lane on a single server or Sentinel, one per
//     master on a Cluster) and waits for its answer, its deadline or the
//     end of its context, whichever comes first.
//  4. Up to BatchConfig.Senders sender goroutines per lane (lane.send)
//     take turns to gather everything queued, up to BatchConfig.MaxSize
//     (while another batch is on its way a small one first waits a moment
//     for more, lane.hold), and each flushes what it gathered
//     (sender.flush): answer the members whose callers gave up, group
//     the others by algorithm (and Cluster slot), build one batch-script
//     call per group, send the calls in one pipeline and hand each member
//     its answer.
//  5. A request goes back to the pool once its answer has been read.
//     One whose caller stopped waiting, or that its timer answered at
//     its deadline, is left to the garbage collector, because a sender
//     may still hold it.

import (
	"bytes"
	"context"
	"errors"
	"slices"
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

// maxHold is the longest a batch waits for another batch of its lane to
// land before it is sent; see lane.hold.
const maxHold = time.Millisecond

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
// every decision its answer. A batch holds what arrived while the previous
// ones were on their way: one that would set off while another is on its
// way with fewer than MaxSize/4 decisions first waits, at most 1 ms, for
// that one to land (or for MaxSize/4 decisions to gather), so that a busy
// server sends fewer, fuller calls. A script runs atomically, so every
// decision in a batch is as atomic as when made alone, and the batch
// script makes each exactly as the single script would (one Redis TIME per
// call).
type BatchConfig struct {
	// Disabled makes every decision its own script call.
	Disabled bool
	// MaxSize caps the decisions in one batch. Default DefaultBatchMaxSize.
	MaxSize int
	// Senders is the number of batches on their way to Redis at once.
	// Default DefaultBatchSenders.
	Senders int
}

// batcher queues decisions and runs the senders. On a single server (or
// Sentinel) it has one lane; on a Cluster one lane per master node, so
// that a node that does not answer holds up only the decisions for its
// own slots.
type batcher struct {
	s       *Store
	maxSize int
	senders int32
	// gather is the queue length at which a batch sets off without
	// waiting for another to land (lane.hold).
	gather int
	// inFlight counts the store's decisions in progress: one alone goes
	// straight to Redis (Store.send).
	inFlight atomic.Int64
	// one is the only lane when the store is not on a Cluster.
	one *lane
	// lanes are a Cluster's lanes by node client (*redis.Client → *lane;
	// go-redis keeps one client per node address).
	lanes sync.Map
	// routed is set once the Cluster client has a slot map.
	routed atomic.Bool
	// trace, when set, links each batch to its decisions' traces.
	trace BatchTracer
}

// lane is a queue of decisions bound for one Redis node and the senders
// that empty it.
type lane struct {
	b       *batcher
	queue   chan *request
	running atomic.Int32
	// turn holds a token when no sender is gathering a batch (lane.send).
	turn chan struct{}
	// flying counts the lane's batches on their way; holding is 1 while
	// the sender gathering waits in hold, which landed (a token, capacity
	// 1) ends when a batch lands or the queue reaches gather.
	flying  atomic.Int32
	holding atomic.Int32
	landed  chan struct{}
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
	b := &batcher{s: s, maxSize: cfg.MaxSize, senders: int32(cfg.Senders), gather: max(cfg.MaxSize/4, 2), trace: trace}
	if !s.cluster {
		b.one = b.newLane()
	}
	return b
}

func (b *batcher) newLane() *lane {
	ln := &lane{b: b, queue: make(chan *request, 4*b.maxSize*int(b.senders)),
		turn: make(chan struct{}, 1), landed: make(chan struct{}, 1)}
	ln.turn <- struct{}{}
	return ln
}

// errDeadline is returned when a decision's timeout passes while it waits.
var errDeadline = context.DeadlineExceeded

// wait queues r on its node's lane and waits for its answer, its deadline
// or the end of ctx, whichever comes first: a sender's answer and the
// deadline (r's timer, which answers errDeadline) both come through
// r.done, so a wait watches two channels. r goes back to the pool unless
// its caller gave up after queueing it, or its timer answered, since a
// sender may still be holding it.
func (b *batcher) wait(ctx context.Context, r *request, timeout time.Duration) (limiter.Decision, error) {
	r.answered.Store(0)
	timed := r.setDeadline(ctx, timeout)
	ln, err := b.laneFor(ctx, r)
	expired := false
	if err == nil {
		expired, err = ln.enqueue(ctx, r)
	}
	if err != nil {
		// Not queued: once the timer is stopped, or has answered (its
		// last touch of r), nothing holds r.
		if expired || r.disarm(timed) {
			b.s.recycle(r)
		}
		return limiter.Decision{}, err
	}
	select {
	case <-r.done:
		d, err := r.d, r.err
		if r.disarm(timed) {
			b.s.recycle(r) // answered by a sender, which is done with it
		}
		return d, err
	case <-ctx.Done():
		r.disarm(timed)
		return limiter.Decision{}, ctx.Err()
	}
}

// setDeadline records r's context and deadline, the earlier of ctx's and
// timeout from now, and, when timeout is the earlier, arms r's reused
// timer to answer errDeadline then and returns true (false: ctx.Done ends
// the wait).
func (r *request) setDeadline(ctx context.Context, timeout time.Duration) bool {
	r.ctx = ctx
	dl, ok := ctx.Deadline()
	if timeout <= 0 {
		if ok {
			r.deadline = dl
		}
		return false
	}
	r.deadline = time.Now().Add(timeout)
	if ok && dl.Before(r.deadline) {
		r.deadline = dl
		return false
	}
	if r.timer == nil {
		r.timer = time.AfterFunc(timeout, r.expire)
	} else {
		r.timer.Reset(timeout)
	}
	return true
}

// expire answers r with errDeadline unless it has its answer already.
func (r *request) expire() { deliver(r, limiter.Decision{}, errDeadline) }

// disarm stops r's timer when timed (from setDeadline), and reports
// whether the timer can no longer touch r: false when it has fired, and
// may still be answering.
func (r *request) disarm(timed bool) bool {
	return !timed || r.timer.Stop()
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
	node, err := b.s.cc.MasterForKey(ctx, r.keys[0])
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

// enqueue puts r in the lane's queue, waiting for room until ctx ends or
// r's timer answers it (expired, and errDeadline), and makes sure a
// sender will take it.
func (ln *lane) enqueue(ctx context.Context, r *request) (expired bool, err error) {
	select {
	case ln.queue <- r:
	default:
		select {
		case ln.queue <- r:
		case <-ctx.Done():
			return false, ctx.Err()
		case <-r.done:
			return true, errDeadline
		}
	}
	ln.wake()
	if ln.holding.Load() > 0 && len(ln.queue)+1 >= ln.b.gather {
		ln.signal()
	}
	return false, nil
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
// One sender at a time gathers a batch (the one holding the lane's turn):
// the next one gathers while this one's batch is on its way.
func (ln *lane) send() {
	sd := newSender(ln.b)
	sd.node = ln.node
	idle := time.NewTimer(senderIdle)
	defer idle.Stop()
	hold := time.NewTimer(maxHold)
	hold.Stop()
	busy := time.Now() // when this sender last had work
	for {
		if !ln.takeTurn(idle, busy) {
			sd.conn.close()
			return
		}
		first := ln.next(idle, busy)
		if first == nil {
			ln.turn <- struct{}{}
			sd.conn.close()
			return
		}
		ln.hold(hold)
		sd.batch = ln.drain(append(sd.batch[:0], first))
		ln.flying.Add(1)
		ln.turn <- struct{}{}
		sd.flush(sd.batch)
		ln.flying.Add(-1)
		ln.signal()
		clear(sd.batch) // drop references to delivered requests
		busy = time.Now()
	}
}

// idleLeft resets idle to what is left of senderIdle since busy.
func idleLeft(idle *time.Timer, busy time.Time) {
	idle.Reset(max(senderIdle-time.Since(busy), time.Millisecond))
}

// takeTurn waits for the lane's turn to gather a batch, and returns false
// when the sender has had nothing to do for senderIdle since busy and has
// left the running count (the sender holding the turn is alive, so
// nothing queued is left without a sender).
func (ln *lane) takeTurn(idle *time.Timer, busy time.Time) bool {
	select {
	case <-ln.turn:
		return true
	default:
	}
	idleLeft(idle, busy)
	select {
	case <-ln.turn:
		idle.Stop()
		return true
	case <-idle.C:
		ln.running.Add(-1)
		return false
	}
}

// hold makes a batch about to set off while another of the lane is on its
// way wait, at most maxHold (timer, stopped), until that one lands or
// gather decisions are queued: the decisions that arrive meanwhile go in
// this batch instead of in the next one. On a busy server a batch sent at
// once would hold the few decisions that came in since the last set off
// and wait behind it in Redis anyway; fuller batches cost fewer calls, in
// this process and in Redis. maxHold bounds what this adds to a decision
// when the lane's round trips are long (a distant Redis).
func (ln *lane) hold(timer *time.Timer) {
	if ln.flying.Load() == 0 || len(ln.queue)+1 >= ln.b.gather {
		return
	}
	ln.holding.Add(1)
	defer ln.holding.Add(-1)
	select { // a token left from a landing nobody waited for
	case <-ln.landed:
	default:
	}
	if ln.flying.Load() == 0 || len(ln.queue)+1 >= ln.b.gather {
		return
	}
	timer.Reset(maxHold)
	select {
	case <-ln.landed:
		timer.Stop()
	case <-timer.C:
	}
}

// signal wakes a sender waiting in hold, if any.
func (ln *lane) signal() {
	select {
	case ln.landed <- struct{}{}:
	default:
	}
}

// next waits for the first request of the next batch, or returns nil when
// none came for senderIdle since busy and the sender has left the running
// count.
func (ln *lane) next(idle *time.Timer, busy time.Time) *request {
	for {
		select {
		case r := <-ln.queue:
			return r
		default:
		}
		idleLeft(idle, busy)
		select {
		case r := <-ln.queue:
			idle.Stop()
			return r
		case <-idle.C:
			ln.running.Add(-1)
			if len(ln.queue) == 0 {
				return nil
			}
			// A decision queued just before the count went down would
			// wait for the next sender: take it on after all, unless
			// another sender started meanwhile.
			if ln.running.Add(1) <= ln.b.senders {
				continue
			}
			ln.running.Add(-1)
			return nil
		}
	}
}

// drain appends what else is queued to batch, up to the batch size.
func (ln *lane) drain(batch []*request) []*request {
	for len(batch) < ln.b.maxSize {
		select {
		case r := <-ln.queue:
			batch = append(batch, r)
		default:
			return batch
		}
	}
	return batch
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
	// pending and cmds are reused by singly.
	pending []*request
	cmds    []*redis.Cmd
	enc     encoder
	// deadline is the context of a batch on the warm connection.
	deadline deadlineCtx
	// cancel and traceEnd end the current batch's context and trace.
	cancel   context.CancelFunc
	traceEnd func()
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

// deliver hands r its answer, unless it has one already (from its timer,
// or from a sender when the timer fires).
func deliver(r *request, d limiter.Decision, err error) {
	if r.answered.CompareAndSwap(0, 1) {
		r.d, r.err = d, err
		r.done <- struct{}{}
	}
}

// flush sends one batch and delivers every answer.
func (sd *sender) flush(batch []*request) {
	live, deadline := dropExpired(batch)
	if len(live) == 0 {
		return
	}
	conn, warm := sd.conn.take()
	ctx := sd.begin(live, deadline, warm)
	defer sd.end()
	sd.group(live)
	sd.buildCommands()
	sd.exchange(ctx, conn)
}

// dropExpired answers the members of batch whose context has ended or
// whose deadline has passed, and returns the others (in batch's backing
// array) with the latest of their deadlines; zero when one of them has
// none.
func dropExpired(batch []*request) (live []*request, deadline time.Time) {
	now := time.Now()
	unbounded := false
	live = batch[:0]
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			deliver(r, limiter.Decision{}, err)
			continue
		}
		switch {
		case r.deadline.IsZero():
			unbounded = true
		case !now.Before(r.deadline):
			deliver(r, limiter.Decision{}, errDeadline)
			continue
		case r.deadline.After(deadline):
			deadline = r.deadline
		}
		live = append(live, r)
	}
	if unbounded {
		deadline = time.Time{}
	}
	return live, deadline
}

// begin returns the context the batch's calls run with: a background
// context that lasts until the latest member's deadline (each member
// stops waiting at its own), handed to the BatchTracer when there is one.
// end releases it. When the batch goes through the sender's warm
// connection and is not traced, the context only carries the deadline
// (sender.deadline), which go-redis applies to the connection's reads and
// writes, without the timer of a context.WithDeadline: nothing waits on
// its end (no pool checkout) and no tracer keeps it.
func (sd *sender) begin(live []*request, deadline time.Time, warm bool) context.Context {
	ctx := context.Background()
	if !deadline.IsZero() {
		if warm && sd.b.trace == nil {
			sd.deadline = deadlineCtx{Context: ctx, deadline: deadline}
			return &sd.deadline
		}
		ctx, sd.cancel = context.WithDeadline(ctx, deadline)
	}
	if sd.b.trace != nil {
		for _, r := range live {
			sd.traced = append(sd.traced, r.ctx)
		}
		ctx, sd.traceEnd = sd.b.trace.TraceBatch(ctx, sd.traced)
		clear(sd.traced)
		sd.traced = sd.traced[:0]
	}
	return ctx
}

// deadlineCtx is a context with a deadline and nothing else: its Done
// channel is nil and its Err nil, past the deadline too. See sender.begin.
type deadlineCtx struct {
	context.Context
	deadline time.Time
}

// Deadline returns the context's deadline.
func (c *deadlineCtx) Deadline() (time.Time, bool) { return c.deadline, true }

// end ends what begin started, once the answers are delivered.
func (sd *sender) end() {
	if sd.traceEnd != nil {
		sd.traceEnd()
	}
	if sd.cancel != nil {
		sd.cancel()
	}
	sd.cancel, sd.traceEnd = nil, nil
}

// group sorts the live members into sd.groups: by algorithm and, on a
// Cluster, by slot.
func (sd *sender) group(live []*request) {
	sd.groups = sd.groups[:0]
	clear(sd.byKey)
	for _, r := range live {
		k := r.alg
		if sd.b.s.cluster {
			k = r.alg*clusterSlots + r.slot
		}
		gi, ok := sd.byKey[k]
		if !ok {
			gi = len(sd.groups)
			sd.byKey[k] = gi
			if gi < cap(sd.groups) {
				// A group of an earlier batch, or zeroed capacity that
				// append left: that one has no reply buffer yet.
				sd.groups = sd.groups[:gi+1]
				g := &sd.groups[gi]
				g.alg, g.members = r.alg, g.members[:0]
				if g.raw == nil {
					g.raw = new(bytes.Buffer)
				}
			} else {
				sd.groups = append(sd.groups, group{alg: r.alg, raw: new(bytes.Buffer)})
			}
		}
		sd.groups[gi].members = append(sd.groups[gi].members, r)
	}
}

// buildCommands builds each group's command in sd.args (see encoder).
func (sd *sender) buildCommands() {
	sd.args = sd.args[:0]
	sd.enc.reserve(sd.groups)
	for gi := range sd.groups {
		g := &sd.groups[gi]
		start := len(sd.args)
		sd.args = sd.enc.encode(sd.args, &sd.b.s.algs[g.alg], g)
		g.args = sd.args[start:len(sd.args):len(sd.args)]
	}
}

// encoder writes a group's batch-script call, each distinct key and each
// distinct set of limit parameters once:
//
//	EVALSHA sha numkeys <the distinct keys, nkeys each>
//	    n sets shared <the sets' parameters, one set after another>
//	    <per decision, in the members' order: code, cost>
//
// where code = (key index × sets + set index) × 3 + mode (indexes from 0).
// The keys that more than one decision uses come first: the first shared
// ones run with the script's cache (lua/batch.lua). Pointers into the
// requests and into nums box without allocating. The zero value is ready;
// an encoder is used by one sender.
type encoder struct {
	nums  []int64                // n, sets, shared and the codes, pointed to by args
	byKey map[string]int         // distinct key index by first key
	bySet map[[maxArgs]int64]int // set index by parameters (zero beyond the algorithm's)
	first []int                  // member index of each distinct key's first decision
	count []int                  // decisions per distinct key
	rank  []int                  // distinct key index → position in KEYS
	sets  []int                  // member index of each distinct set's first decision
	key   []int                  // per member: distinct key index
	set   []int                  // per member: set index
}

// reserve makes room in nums for groups' numbers, so that the pointers
// taken into it stay valid while the commands are built.
func (e *encoder) reserve(groups []group) {
	n := 0
	for gi := range groups {
		n += 3 + len(groups[gi].members)
	}
	e.nums = slices.Grow(e.nums[:0], n)
}

// encode appends g's command to dst.
func (e *encoder) encode(dst []any, sc *algScripts, g *group) []any {
	np := sc.spec.NumParams()
	e.first, e.count, e.sets = e.first[:0], e.count[:0], e.sets[:0]
	e.key, e.set = e.key[:0], e.set[:0]
	if e.byKey == nil {
		e.byKey, e.bySet = make(map[string]int), make(map[[maxArgs]int64]int)
	}
	clear(e.byKey)
	clear(e.bySet)
	for i, r := range g.members {
		// The same key and limit as the decision before is the usual case
		// of a hot key.
		var k int
		if i > 0 && r.keys[0] == g.members[i-1].keys[0] {
			k = e.key[i-1]
		} else if ki, ok := e.byKey[r.keys[0]]; ok {
			k = ki
		} else {
			k = len(e.first)
			e.byKey[r.keys[0]] = k
			e.first = append(e.first, i)
			e.count = append(e.count, 0)
		}
		e.count[k]++
		e.key = append(e.key, k)
		var p int
		if i > 0 && slices.Equal(r.args[:np], g.members[i-1].args[:np]) {
			p = e.set[i-1]
		} else {
			var params [maxArgs]int64
			copy(params[:np], r.args[:np])
			si, ok := e.bySet[params]
			if !ok {
				si = len(e.sets)
				e.bySet[params] = si
				e.sets = append(e.sets, i)
			}
			p = si
		}
		e.set = append(e.set, p)
	}
	// KEYS: the shared keys, then the others, each in order of first use.
	e.rank = slices.Grow(e.rank[:0], len(e.first))[:len(e.first)]
	shared := 0
	for k, c := range e.count {
		if c > 1 {
			e.rank[k] = shared
			shared++
		}
	}
	pos := shared
	for k, c := range e.count {
		if c <= 1 {
			e.rank[k] = pos
			pos++
		}
	}
	g.numKeys = int64(len(e.first) * sc.nkeys)
	dst = append(dst, "evalsha", sc.batch.shaArg, &g.numKeys)
	start := len(dst)
	dst = slices.Grow(dst, len(e.first)*sc.nkeys)[:start+len(e.first)*sc.nkeys]
	for k, m := range e.first {
		r := g.members[m]
		for j := 0; j < sc.nkeys; j++ {
			dst[start+e.rank[k]*sc.nkeys+j] = &r.keys[j]
		}
	}
	head := len(e.nums)
	e.nums = append(e.nums, int64(len(g.members)), int64(len(e.sets)), int64(shared))
	dst = append(dst, &e.nums[head], &e.nums[head+1], &e.nums[head+2])
	for _, m := range e.sets {
		r := g.members[m]
		for j := 0; j < np; j++ {
			dst = append(dst, &r.args[j])
		}
	}
	nsets := int64(len(e.sets))
	for i, r := range g.members {
		code := (int64(e.rank[e.key[i]])*nsets+int64(e.set[i]))*3 + int64(r.mode)
		e.nums = append(e.nums, code)
		dst = append(dst, &e.nums[len(e.nums)-1], &r.args[np])
	}
	return dst
}

// exchange sends the groups' commands and delivers their answers. On a
// single server the batch goes through the sender's own connection (conn,
// from take, which exchange gives back); on a Cluster through the lane's
// node.
func (sd *sender) exchange(ctx context.Context, conn *redis.Conn) {
	s := sd.b.s
	sd.via = s.client
	if conn != nil {
		sd.via = conn
	} else if sd.node != nil {
		sd.via = sd.node
	}
	sd.exec(ctx)
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
	s := sd.b.s
	if len(sd.groups) == 1 && s.wait == nil {
		_ = sd.via.Process(ctx, sd.groups[0].cmd)
		return
	}
	pipe := sd.via.Pipeline()
	for gi := range sd.groups {
		_ = pipe.Process(ctx, sd.groups[gi].cmd)
	}
	var wait *redis.IntCmd
	if s.wait != nil {
		// After every group: it waits for all of this connection's writes.
		wait = redis.NewIntCmd(ctx, s.wait...)
		_ = pipe.Process(ctx, wait)
	}
	_, _ = pipe.Exec(ctx)
	if wait != nil {
		n := 0
		for gi := range sd.groups {
			if sd.groups[gi].cmd.Err() == nil {
				n += len(sd.groups[gi].members)
			}
		}
		if n > 0 {
			s.waited(wait, n)
		}
	}
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
	s := sd.b.s
	err := sd.replyInts(g)
	if isNoScript(err) {
		g.args[0], g.args[1] = "eval", s.algs[g.alg].batch.srcArg
		sd.ints, err = s.call(ctx, sd.via, g.args, g.raw, sd.ints)
	}
	if sd.node != nil && isMoved(err) {
		// The slot moved: the cluster client follows the redirection, and
		// the slot map is reloaded.
		s.noteError(err)
		sd.ints, err = s.run(ctx, s.client, &s.algs[g.alg].batch, g.args, g.raw, sd.ints)
	}
	if s.cluster && (isTryAgain(err) || isAsk(err)) {
		// The slot is migrating and the group's keys are on both sides
		// (TRYAGAIN), or some are on the importing master (ASK, where the
		// others would answer TRYAGAIN): Redis ran nothing. Each decision
		// goes on its own, which a migration splits no more than MIGRATE
		// splits its keys.
		return sd.singly(ctx, g)
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

// Backoff of a call that Redis answered TRYAGAIN (see retryWait).
const (
	tryAgainFirst = time.Millisecond
	tryAgainMax   = 8 * time.Millisecond
)

// retryWait waits backoff before a call answered TRYAGAIN is sent again,
// and reports false, without waiting, when ctx would end first (its
// deadline, or its end): the decision then fails with the TRYAGAIN.
func retryWait(ctx context.Context, backoff time.Duration) bool {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= backoff {
		return false
	}
	t := time.NewTimer(backoff)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// singly makes each of g's decisions as its own call of its algorithm's
// single script, pipelined through the cluster client, which follows
// each call's ASK (to the importing master, with ASKING) or MOVED. A
// call answered TRYAGAIN (its few keys split by a MIGRATE in progress,
// or, on the importing master, not all there yet) is sent again after a
// short backoff (tryAgainFirst doubling up to tryAgainMax) until ctx's
// deadline, which is the latest member's: a member whose own deadline
// passes meanwhile has had its answer from its timer. Redis answers
// TRYAGAIN without running the script, so a call sent again is never
// counted twice. It returns the last error a member was answered with.
func (sd *sender) singly(ctx context.Context, g *group) error {
	s := sd.b.s
	sc := &s.algs[g.alg].single
	pending := append(sd.pending[:0], g.members...)
	defer func() { clear(sd.pending); sd.pending = pending[:0] }()
	var last error
	eval := false
	for backoff := tryAgainFirst; ; backoff = min(2*backoff, tryAgainMax) {
		pipe := s.cc.Pipeline()
		sd.cmds = sd.cmds[:0]
		for _, r := range pending {
			args := r.cmdArgs()
			args[0], args[1] = "evalsha", sc.shaArg
			if eval {
				args[0], args[1] = "eval", sc.srcArg
			}
			c := redis.NewCmd(ctx, args...)
			c.SetFirstKeyPos(3)
			sd.cmds = append(sd.cmds, c)
			_ = pipe.Process(ctx, scriptCmd{c})
		}
		_, _ = pipe.Exec(ctx)
		again := pending[:0]
		for i, r := range pending {
			err := sd.cmds[i].Err()
			switch {
			case isNoScript(err):
				eval = true
				again = append(again, r)
				continue
			case isTryAgain(err):
				last = err
				again = append(again, r)
				continue
			case err == nil:
				sd.ints, err = anyInts(sd.cmds[i].Val(), sd.ints)
			}
			if err != nil {
				last = err
				deliver(r, limiter.Decision{}, err)
				continue
			}
			d, derr := r.answer(decodeInts(sd.ints))
			deliver(r, d, derr)
		}
		clear(sd.cmds)
		pending = again
		if len(pending) == 0 {
			return last
		}
		if !retryWait(ctx, backoff) {
			for _, r := range pending {
				deliver(r, limiter.Decision{}, last)
			}
			return last
		}
	}
}
