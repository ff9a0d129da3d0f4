package redisstore

// The batching layer behind Store.send. Every store operation is a
// request (decide.go); one made while others are in progress is queued
// (wait, or post when nobody waits) on the lane of its Redis node (one per
// Cluster master). Up to BatchConfig.Senders goroutines per lane take turns
// to gather up to MaxSize of what is queued and flush it: one batch-script
// call per script family and slot (encode.go), all in one pipeline, so a
// reserve or a settle rides the round trip of the decisions beside it. A
// request goes back to the pool once its answer is read; one whose caller
// gave up is left to the garbage collector, as a sender may still hold it.

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// Defaults of BatchConfig.
const (
	DefaultBatchMaxSize = 128
	DefaultBatchSenders = 2
)

// senderIdle is how long an idle sender goroutine lives.
const senderIdle = 2 * time.Second

// maxHold bounds lane.hold.
const maxHold = time.Millisecond

// BatchConfig says how concurrent decisions share script calls; the zero
// value batches (see the top of this file and lane.hold).
type BatchConfig struct {
	// Disabled makes every decision its own script call.
	Disabled bool
	// MaxSize caps the decisions in one batch. Default DefaultBatchMaxSize.
	MaxSize int
	// Senders is the number of batches on their way to Redis at once
	// (per Cluster master). Default DefaultBatchSenders.
	Senders int
}

// batcher queues decisions and runs the senders: one lane per Cluster
// master, so a master that does not answer holds up only its own slots.
type batcher struct {
	s       *Store
	maxSize int
	senders int32
	// gather is the queue length that ends lane.hold.
	gather int
	// inFlight counts the decisions in progress (Store.send).
	inFlight atomic.Int64
	// one is the lane off a Cluster.
	one *lane
	// lanes are a Cluster's lanes by node client (*redis.Client → *lane).
	lanes  sync.Map
	routed atomic.Bool
	trace  BatchTracer
	// quit, closed by retire (Store.Close), sends the senders home as their idle timer does;
	// live counts them, and each one leaving signals gone.
	quit     chan struct{}
	quitOnce sync.Once
	live     atomic.Int32
	gone     chan struct{}
}

// lane is the queue of one Redis node and its senders.
type lane struct {
	b       *batcher
	queue   chan *request
	running atomic.Int32
	// turn holds a token when no sender is gathering a batch (lane.send).
	turn chan struct{}
	// flying counts batches on their way; holding is 1 while a sender
	// waits in hold, which landed ends.
	flying  atomic.Int32
	holding atomic.Int32
	landed  chan struct{}
	// node is a Cluster master's own client (nil: the store's client);
	// a group it redirects is sent again through the cluster client.
	node *redis.Client
}

func newBatcher(s *Store, cfg BatchConfig, trace BatchTracer) *batcher {
	if cfg.MaxSize <= 0 {
		cfg.MaxSize = DefaultBatchMaxSize
	}
	if cfg.Senders <= 0 {
		cfg.Senders = DefaultBatchSenders
	}
	b := &batcher{s: s, maxSize: cfg.MaxSize, senders: int32(cfg.Senders), gather: max(cfg.MaxSize/4, 2), trace: trace,
		quit: make(chan struct{}), gone: make(chan struct{}, 1)}
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

// wait queues r and waits for its answer (a sender's, or its timer's
// errDeadline, through r.done) or the end of ctx.
func (b *batcher) wait(ctx context.Context, r *request, timeout time.Duration) reply {
	r.answered.Store(0)
	timed := r.setDeadline(ctx, timeout)
	ln, err := b.laneFor(ctx, r)
	expired := false
	if err == nil {
		expired, err = ln.enqueue(ctx, r)
	}
	if err != nil {
		// Not queued: once the timer is stopped or has answered, nothing holds r.
		if expired || r.disarm(timed) {
			b.s.recycle(r)
		}
		return reply{err: err}
	}
	select {
	case <-r.done:
		rep := reply{d: r.d, err: r.err, ints: r.out, n: r.nout, set: r.sout}
		r.sout = nil
		if r.disarm(timed) {
			b.s.recycle(r) // answered by a sender, which is done with it
		}
		return rep
	case <-ctx.Done():
		r.disarm(timed)
		return reply{err: ctx.Err()}
	}
}

// post queues r, which nobody waits for, waiting only for room in a full
// queue until r's deadline. r.then gets its answer (or the error that kept
// it from Redis) on a sender's goroutine, or the caller's if not queued.
func (b *batcher) post(ctx context.Context, r *request, timeout time.Duration) {
	r.answered.Store(0)
	r.ctx = ctx
	if dl, ok := ctx.Deadline(); ok {
		r.deadline = dl
	}
	if timeout > 0 {
		if dl := time.Now().Add(timeout); r.deadline.IsZero() || dl.Before(r.deadline) {
			r.deadline = dl
		}
	}
	ln, err := b.laneFor(ctx, r)
	if err == nil {
		err = ln.enqueueBy(ctx, r)
	}
	if err != nil {
		deliver(r, limiter.Decision{}, nil, err)
	}
}

// setDeadline records r's context and deadline (the earlier of ctx's and
// timeout's) and reports whether it armed r's timer for timeout's.
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

func (r *request) expire() { deliver(r, limiter.Decision{}, nil, errDeadline) }

// disarm stops r's timer when timed; true once the timer cannot touch r.
func (r *request) disarm(timed bool) bool {
	return !timed || r.timer.Stop()
}

// laneFor returns the lane of the node holding r's slot (loading the slot
// map first if need be, within r's deadline).
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

// enqueue queues r, waiting for room until ctx ends or r's timer answers
// it (expired), and makes sure a sender will take it.
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
	ln.queued()
	return false, nil
}

// queued makes sure a sender will take what was just queued.
func (ln *lane) queued() {
	ln.wake()
	if ln.holding.Load() > 0 && len(ln.queue)+1 >= ln.b.gather {
		ln.signal()
	}
}

// enqueueBy queues r, which has no timer, waiting for room until ctx ends
// or r's deadline passes.
func (ln *lane) enqueueBy(ctx context.Context, r *request) error {
	select {
	case ln.queue <- r:
		ln.queued()
		return nil
	default:
	}
	var expired <-chan time.Time
	if !r.deadline.IsZero() {
		t := time.NewTimer(time.Until(r.deadline))
		defer t.Stop()
		expired = t.C
	}
	select {
	case ln.queue <- r:
		ln.queued()
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-expired:
		return errDeadline
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
			ln.b.live.Add(1)
			go ln.send()
			return
		}
	}
}

// send is one sender goroutine, until idle for senderIdle.
func (ln *lane) send() {
	defer ln.b.left()
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

// left is a sender leaving, for retire.
func (b *batcher) left() {
	b.live.Add(-1)
	select {
	case b.gone <- struct{}{}:
	default:
	}
}

// retire sends the senders home and waits, until ctx ends, for all to leave (see Store.Close);
// one started for a decision that slipped in before Close sends it first.
func (b *batcher) retire(ctx context.Context) {
	b.quitOnce.Do(func() { close(b.quit) })
	for b.live.Load() > 0 {
		select {
		case <-b.gone:
		case <-ctx.Done():
			return
		}
	}
}

func idleLeft(idle *time.Timer, busy time.Time) {
	idle.Reset(max(senderIdle-time.Since(busy), time.Millisecond))
}

// takeTurn waits for the lane's turn to gather a batch; false once idle
// (the turn's holder lives on, so nothing queued is left without one).
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
	case <-ln.b.quit:
		idle.Stop()
		select { // the turn first: whoever takes it looks at the queue once more (next)
		case <-ln.turn:
			return true
		default:
		}
		ln.running.Add(-1)
		return false
	}
}

// hold makes a batch about to set off while another is on its way wait,
// at most maxHold, until that one lands or gather decisions are queued:
// sent at once it would wait behind the other in Redis anyway, and fuller
// batches cost fewer calls. maxHold bounds the cost on a distant Redis.
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

// claim reports whether a decision may go alone from its caller, counted
// in flying until land: with fewer than the senders on their way, the turn
// free (no sender gathering) and nothing queued, none would join it.
func (ln *lane) claim() bool {
	if ln.flying.Load() >= ln.b.senders || len(ln.queue) > 0 {
		return false
	}
	select {
	case <-ln.turn:
	default:
		return false
	}
	ok := ln.flying.Add(1) <= ln.b.senders && len(ln.queue) == 0
	ln.turn <- struct{}{}
	if !ok {
		ln.land()
	}
	return ok
}

// land ends a call that claim let through.
func (ln *lane) land() {
	ln.flying.Add(-1)
	ln.signal()
}

// signal wakes a sender waiting in hold, if any.
func (ln *lane) signal() {
	select {
	case ln.landed <- struct{}{}:
	default:
	}
}

// next waits for the first request of the next batch; nil once idle.
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
		case <-ln.b.quit: // retired by Store.Close: as idle
			idle.Stop()
		}
		ln.running.Add(-1)
		if len(ln.queue) == 0 {
			return nil
		}
		// One queued just before the count went down: take it on.
		if ln.running.Add(1) <= ln.b.senders {
			continue
		}
		ln.running.Add(-1)
		return nil
	}
}

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
	b       *batcher
	node    *redis.Client // the lane's Cluster master, or nil
	conn    ownConn
	via     processor // what the current batch goes through
	batch   []*request
	groups  []group
	byKey   map[int]int // group index by algorithm and slot
	args    []any
	ints    []int64
	traced  []context.Context // the members' contexts, for BatchTracer
	pending []*request
	cmds    []*redis.Cmd
	enc     encoder
	// deadline is the context of a batch on the warm connection.
	deadline deadlineCtx
	cancel   context.CancelFunc
	traceEnd func()
}

// group is the requests of one batch that go in one script call: one
// script family's (famReserve), on one Cluster slot.
type group struct {
	fam     int
	numKeys int64
	members []*request
	cmd     redis.Cmder
	args    []any
	raw     *bytes.Buffer // the raw reply on a single server, reused
}

func newSender(b *batcher) *sender {
	sd := &sender{b: b, byKey: make(map[int]int)}
	sd.conn.client = b.s.single
	return sd
}

// deliver hands r its answer (a decision's d, or an operation's ints),
// unless it has one already: to its waiting caller, or to r.then.
func deliver(r *request, d limiter.Decision, ints []int64, err error) {
	if r.answered.CompareAndSwap(0, 1) {
		r.d, r.err = d, err
		if r.fam == famSet {
			r.sout = append(r.sout[:0], ints...)
		} else {
			r.nout = copy(r.out[:], ints)
		}
		if r.then != nil {
			// then recycles r: the store is read first.
			s := r.s
			r.then(r)
			s.async.done()
			return
		}
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

// dropExpired answers the members past their deadline and returns the
// others with the latest deadline (zero: one has none).
func dropExpired(batch []*request) (live []*request, deadline time.Time) {
	now := time.Now()
	unbounded := false
	live = batch[:0]
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			deliver(r, limiter.Decision{}, nil, err)
			continue
		}
		switch {
		case r.deadline.IsZero():
			unbounded = true
		case !now.Before(r.deadline):
			deliver(r, limiter.Decision{}, nil, errDeadline)
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

// begin returns the batch's context, until the latest member's deadline:
// untraced on the warm connection a deadlineCtx, with no timer.
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

// deadlineCtx is a context with a deadline alone (nil Done and Err).
type deadlineCtx struct {
	context.Context
	deadline time.Time
}

func (c *deadlineCtx) Deadline() (time.Time, bool) { return c.deadline, true }

// end ends what begin started, once the answers are delivered.
func (sd *sender) end() {
	sd.endTrace()
	if sd.cancel != nil {
		sd.cancel()
	}
	sd.cancel = nil
}

func (sd *sender) endTrace() {
	if sd.traceEnd != nil {
		sd.traceEnd()
		sd.traceEnd = nil
	}
}

// group sorts the live members by script family and Cluster slot.
func (sd *sender) group(live []*request) {
	sd.groups = sd.groups[:0]
	clear(sd.byKey)
	for _, r := range live {
		k := r.fam
		if sd.b.s.cluster {
			k = r.fam*clusterSlots + r.slot
		}
		gi, ok := sd.byKey[k]
		if !ok {
			gi = len(sd.groups)
			sd.byKey[k] = gi
			if gi < cap(sd.groups) {
				// Capacity append left: no reply buffer yet.
				sd.groups = sd.groups[:gi+1]
				g := &sd.groups[gi]
				g.fam, g.members = r.fam, g.members[:0]
				if g.raw == nil {
					g.raw = new(bytes.Buffer)
				}
			} else {
				sd.groups = append(sd.groups, group{fam: r.fam, raw: new(bytes.Buffer)})
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
		switch {
		case g.fam < famReserve:
			sd.args = sd.b.s.encode(&sd.enc, sd.args, &sd.b.s.algs[g.fam], g)
		case g.fam == famSet:
			sd.args = sd.enc.encodeSets(sd.args, sd.b.s.sets, g)
		default:
			sd.args = sd.enc.encodeOps(sd.args, sd.b.s.batchScript(g.fam), g)
		}
		g.args = sd.args[start:len(sd.args):len(sd.args)]
	}
}

// exchange sends the groups' commands (through the sender's own conn,
// given back, or the lane's Cluster node) and delivers their answers.
func (sd *sender) exchange(ctx context.Context, conn *redis.Conn) {
	s := sd.b.s
	sd.via = s.client
	if conn != nil {
		sd.via = conn
	} else if sd.node != nil {
		sd.via = sd.node
	}
	g := s.enter()
	s.leave(g, sd.exec(ctx))
	if err := sd.groups[0].cmd.Err(); fenced(err) {
		sd.conn.give(conn, err)
		conn = nil
		sd.via = s.client
		_ = s.afterFence(ctx, func(ctx context.Context) (int, error) {
			n := sd.exec(ctx)
			return n, sd.groups[0].cmd.Err()
		})
	}
	// Before any member hears its answer: its caller finds the span ended.
	sd.endTrace()
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
	sd.conn.give(conn, cmp.Or(failed, s.spoiledErr(conn)))
	sd.via = nil
	clear(sd.args)
}

// newCmd is g's script command (raw or typed, see Store.call).
func (sd *sender) newCmd(ctx context.Context, g *group) redis.Cmder {
	if sd.b.s.typedReplies {
		c := redis.NewCmd(ctx, g.args...)
		c.SetFirstKeyPos(3)
		return scriptCmd{c}
	}
	g.raw.Reset()
	c := redis.NewRawWriteToCmd(ctx, g.raw, g.args...)
	c.SetFirstKeyPos(3)
	return c
}

// exec sends the groups' commands, pipelined when more than one, and
// returns how many members' scripts ran.
func (sd *sender) exec(ctx context.Context) int {
	for gi := range sd.groups {
		sd.groups[gi].cmd = sd.newCmd(ctx, &sd.groups[gi])
	}
	s := sd.b.s
	if s.durability == 0 {
		if len(sd.groups) == 1 {
			_ = sd.via.Process(ctx, sd.groups[0].cmd)
		} else {
			pipe := sd.via.Pipeline()
			for gi := range sd.groups {
				_ = pipe.Process(ctx, sd.groups[gi].cmd)
			}
			_, _ = pipe.Exec(ctx)
		}
		return sd.ran()
	}
	// WAIT after every group: it waits for all of this connection's
	// writes, bounded by the earliest member's deadline.
	cmds := make([]redis.Cmder, len(sd.groups))
	raws := make([]*bytes.Buffer, len(sd.groups))
	var earliest time.Time
	for gi := range sd.groups {
		cmds[gi], raws[gi] = sd.groups[gi].cmd, sd.groups[gi].raw
		for _, r := range sd.groups[gi].members {
			if !r.deadline.IsZero() && (earliest.IsZero() || r.deadline.Before(earliest)) {
				earliest = r.deadline
			}
		}
	}
	role, wait := s.sendDurable(ctx, sd.via, earliest, cmds, raws)
	n := sd.ran()
	s.durableDone(role, wait, n)
	return n
}

// ran counts the members of the groups whose script ran.
func (sd *sender) ran() int {
	n := 0
	for gi := range sd.groups {
		g := &sd.groups[gi]
		if g.cmd.Err() != nil {
			continue
		}
		if _, typed := g.cmd.(scriptCmd); typed || ranScript(g.raw) {
			n += len(g.members)
		}
	}
	return n
}

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

// deliverGroup hands each member its answer (sending the group again with
// EVAL on NOSCRIPT) and returns the group's error.
func (sd *sender) deliverGroup(ctx context.Context, g *group) error {
	s := sd.b.s
	err := sd.replyInts(g)
	if isNoScript(err) {
		g.args[0], g.args[1] = "eval", s.batchScript(g.fam).srcArg
		if s.durability > 0 {
			sd.ints, err = s.callWait(ctx, sd.via, g.args, g.raw, sd.ints, len(g.members))
		} else {
			sd.ints, err = s.call(ctx, sd.via, g.args, g.raw, sd.ints)
		}
	}
	if sd.node != nil && isMoved(err) {
		s.noteError(err)
		sd.ints, err = s.run(ctx, s.client, s.batchScript(g.fam), g.args, g.raw, sd.ints)
	}
	if s.cluster && (isTryAgain(err) || isAsk(err)) {
		// A migrating slot splits the group's keys: Redis ran nothing, so
		// each decision goes on its own, which MIGRATE does not split.
		return sd.singly(ctx, g)
	}
	want := 0
	for _, r := range g.members {
		want += r.width()
	}
	if err == nil && len(sd.ints) != want {
		err = errors.New("unexpected batch reply length")
	}
	at := 0
	for _, r := range g.members {
		if err != nil {
			deliver(r, limiter.Decision{}, nil, err)
			continue
		}
		w := r.width()
		deliverInts(r, sd.ints[at:at+w])
		at += w
	}
	return err
}

// deliverInts hands r the answer its script's integers make.
func deliverInts(r *request, ints []int64) {
	if r.isOp() {
		deliver(r, limiter.Decision{}, ints, nil)
		return
	}
	d, err := r.answer(decodeInts(ints))
	deliver(r, d, nil, err)
}

// Backoff of a call that Redis answered TRYAGAIN (see retryWait).
const (
	tryAgainFirst = time.Millisecond
	tryAgainMax   = 8 * time.Millisecond
)

// retryWait waits backoff, or reports false when ctx ends first.
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

// singly sends each of g's decisions alone through the cluster client (which
// follows ASK and MOVED), again after TRYAGAIN, within ctx; it returns the last error.
func (sd *sender) singly(ctx context.Context, g *group) error {
	s := sd.b.s
	pending := append(sd.pending[:0], g.members...)
	defer func() { clear(sd.pending); sd.pending = pending[:0] }()
	var last error
	eval := false
	for backoff := tryAgainFirst; ; backoff = min(2*backoff, tryAgainMax) {
		pipe := s.cc.Pipeline()
		sd.cmds = sd.cmds[:0]
		for _, r := range pending {
			sc := s.singleScript(r)
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
				deliver(r, limiter.Decision{}, nil, err)
				continue
			}
			if !r.isOp() {
				deliverInts(r, sd.ints)
				continue
			}
			deliver(r, limiter.Decision{}, sd.ints, nil)
		}
		clear(sd.cmds)
		pending = again
		if len(pending) == 0 {
			return last
		}
		if !retryWait(ctx, backoff) {
			for _, r := range pending {
				deliver(r, limiter.Decision{}, nil, last)
			}
			return last
		}
	}
}
