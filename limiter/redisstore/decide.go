package redisstore

// The core of the store: a decision prepared (fill), sent alone (direct,
// run) or batched (batch.go), and decoded (answer).

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// DecideMode implements limiter.Inspector and is the store's one way to
// decide: one decision of cost in mode, atomic on Redis, bounded by ctx
// and by timeout when > 0, alone or in a batch (batch.go). The caller
// validated lim and cost; the store refuses only what would corrupt the
// shared state (checkCall).
func (s *Store) DecideMode(ctx context.Context, key string, lim limiter.Limit, cost int64, mode limiter.Mode, timeout time.Duration) (limiter.Decision, error) {
	if mode > limiter.ModeAtMost {
		return limiter.Decision{}, fmt.Errorf("redis store: unknown mode %d", mode)
	}
	spec := limiter.SpecOf(lim.Algorithm)
	if err := checkCall(spec, lim, cost); err != nil {
		return limiter.Decision{}, err
	}
	r := s.requests.Get().(*request)
	s.fill(r, &s.algs[spec.Index()], key, lim, cost, mode)
	stateKey := r.keys[0]
	rep := s.send(ctx, r, timeout)
	if rep.err != nil {
		return rep.d, fmt.Errorf("redis %s script for %s: %w", lim.Algorithm, stateKey, rep.err)
	}
	return rep.d, nil
}

// Decide implements limiter.Store: DecideMode in ModeConsume, bounded by
// ctx alone.
func (s *Store) Decide(ctx context.Context, key string, lim limiter.Limit, cost int64) (limiter.Decision, error) {
	return s.DecideMode(ctx, key, lim, cost, limiter.ModeConsume, 0)
}

// checkCall refuses what would harm the shared state: a cost below 1, a
// rate or period of 0 (a NaN state), an unknown algorithm.
func checkCall(spec *limiter.AlgorithmSpec, lim limiter.Limit, cost int64) error {
	if spec != nil && cost >= 1 && lim.Rate >= 1 && lim.Period >= time.Millisecond {
		return nil
	}
	if err := lim.Validate(); err != nil {
		return fmt.Errorf("redis store: limit: %w", err)
	}
	return fmt.Errorf("redis store: %w", lim.CheckCost(cost))
}

// fill prepares r's keys and script arguments.
func (s *Store) fill(r *request, sc *algScripts, key string, lim limiter.Limit, cost int64, mode limiter.Mode) {
	r.alg = sc.spec.Index()
	r.fam = r.alg
	base := s.baseKey(key, lim.Algorithm)
	for i, suffix := range sc.keySuffixes {
		r.keys[i] = base + suffix // the empty suffix allocates nothing
	}
	r.nkeys = len(sc.keySuffixes)
	r.nargs = len(argsInto(r.args[:0], sc.spec, key, lim, cost, mode))
	r.idAt = r.nargs
	r.limit, r.cost, r.mode = lim.Quota(), cost, mode
	if s.cluster {
		r.slot = keySlot(base)
	}
}

// send makes r's call: alone when no other is in progress, or when the
// others leave room for one more on its way and none gather (lane.claim),
// as a sender would send it alone a goroutine switch later; else batched.
func (s *Store) send(ctx context.Context, r *request, timeout time.Duration) reply {
	if s.async.isClosed() {
		s.recycle(r)
		return reply{err: ErrClosed}
	}
	if s.batch == nil {
		defer s.recycle(r)
		return s.direct(ctx, r, timeout)
	}
	defer s.batch.inFlight.Add(-1)
	if s.batch.inFlight.Add(1) == 1 {
		defer s.recycle(r)
		return s.direct(ctx, r, timeout)
	}
	if ln := s.batch.one; ln != nil && ln.claim() {
		defer ln.land()
		defer s.recycle(r)
		return s.direct(ctx, r, timeout)
	}
	return s.batch.wait(ctx, r, timeout)
}

func (s *Store) recycle(r *request) {
	clear(r.keys[:r.nkeys])
	r.ctx, r.err, r.id = nil, nil, ""
	r.deadline = time.Time{}
	r.d = limiter.Decision{}
	if r.isOp() {
		// sameSet compares whole arrays.
		r.set = [maxOpNums]int64{}
		r.nout, r.nset, r.kind, r.value = 0, 0, 0, 0
		clear(r.skeys)
		clear(r.sargv)
		r.skeys, r.sparts, r.sargv, r.sout = r.skeys[:0], r.sparts[:0], r.sargv[:0], nil
		r.sheld, r.sid = r.sheld[:0], ""
	}
	r.then, r.onSettle, r.onRelease = nil, nil, nil
	s.requests.Put(r)
}

// direct sends r alone on the caller's goroutine, with the script of its
// kind of call alone.
func (s *Store) direct(ctx context.Context, r *request, timeout time.Duration) reply {
	var via processor = s.client
	own, conn, warm := s.takeDirect()
	if conn != nil {
		via = conn
	}
	if timeout > 0 {
		if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > timeout {
			ctx = r.bound(ctx, timeout, warm)
			defer r.unbind()
		}
	}
	sc := s.singleScript(r)
	g := s.enter()
	ints, err := s.run(ctx, via, sc, r.cmdArgs(), &r.raw, r.ints[:0])
	// TRYAGAIN: a migrating slot splits the keys and Redis ran nothing.
	for backoff := tryAgainFirst; isTryAgain(err) && retryWait(ctx, backoff); backoff = min(2*backoff, tryAgainMax) {
		ints, err = s.run(ctx, via, sc, r.cmdArgs(), &r.raw, ints)
	}
	s.leave(g, ranOne(err))
	if own != nil {
		own.give(conn, cmp.Or(err, s.spoiledErr(conn)))
	}
	if fenced(err) {
		err = s.afterFence(ctx, func(ctx context.Context) (int, error) {
			var err error
			ints, err = s.run(ctx, s.client, sc, r.cmdArgs(), &r.raw, ints)
			return ranOne(err), err
		})
	}
	r.ints = ints
	if err != nil {
		s.noteError(err)
		return reply{err: err}
	}
	var rep reply
	if r.fam == famSet {
		rep.set, r.sout = append(r.sout[:0], ints...), nil
		return rep
	}
	if r.isOp() {
		rep.n = copy(rep.ints[:], ints)
		return rep
	}
	rep.d, rep.err = r.answer(decodeInts(ints))
	return rep
}

// reply is what a call came to: a decision's Decision, or another
// operation's integers (lua/reservations.lua, lua/concurrency.lua).
type reply struct {
	d    limiter.Decision
	ints [replyLen]int64
	n    int
	set  []int64 // a set's answer (request.sout)
	err  error
}

// takeDirect takes the first free connection of s.alone (nil: none).
func (s *Store) takeDirect() (own *ownConn, c *redis.Conn, warm bool) {
	for i := range s.alone {
		if c, warm = s.alone[i].take(); c != nil {
			return &s.alone[i], c, warm
		}
	}
	return nil, nil, false
}

// bound returns ctx bounded by timeout from now: on a warm connection,
// where the deadline bounds the socket's I/O and no pool or dial waits on
// Done, r's own deadlineCtx (no timer, nothing allocated); else a context
// with a timeout, which unbind cancels.
func (r *request) bound(ctx context.Context, timeout time.Duration, warm bool) context.Context {
	if warm {
		r.dctx = deadlineCtx{Context: ctx, deadline: time.Now().Add(timeout)}
		return &r.dctx
	}
	ctx, r.cancel = context.WithTimeout(ctx, timeout)
	return ctx
}

// unbind ends what bound started.
func (r *request) unbind() {
	if r.cancel != nil {
		r.cancel()
		r.cancel = nil
	}
	r.dctx = deadlineCtx{}
}

// request is one store operation on its way (a decision in any mode, or a
// reservation's or lease's call) and, once made, its answer. Requests are
// pooled and hold their keys and arguments in arrays, so that a decision
// allocates only its key and command (TestGoalDecisionAllocatesLittle).
type request struct {
	alg   int   // limiter.AlgorithmSpec.Index
	fam   int   // script family (see famReserve)
	kind  int64 // an operation's call in its family (kindReserve ..., kindAcquire ...)
	keys  [maxOpKeys]string
	nkeys int
	// args are the script's integer arguments, the id between
	// args[:idAt] and args[idAt:nargs] (a decision has none: idAt = nargs).
	args  [maxOpNums]int64
	nargs int
	id    string
	idAt  int
	// set, value and setIndex are an operation's arguments in a batch
	// (encoder.encodeOps): the numbers it shares with others, its own.
	set      [maxOpNums]int64
	nset     int
	value    int64
	setIndex int64
	limit    int64 // the quota, Decision.Limit
	cost     int64
	mode     limiter.Mode
	slot     int // Cluster hash slot

	ctx      context.Context
	deadline time.Time // zero: none besides ctx's

	// answered goes to 1 once the answer is set; done then receives.
	answered atomic.Uint32
	done     chan struct{}
	timer    *time.Timer // the caller's deadline (r.expire), reused
	d        limiter.Decision
	out      [replyLen]int64 // an operation's integers
	nout     int
	err      error
	// then, set on an operation nobody waits for, is called with the
	// answer in place of done, then r goes back to s's pool (batch.go's post).
	then      func(r *request)
	s         *Store
	onSettle  func(limiter.Settlement, error)
	onRelease func(int64, error)

	// dctx or cancel bound a decision sent alone (request.bound).
	dctx   deadlineCtx
	cancel context.CancelFunc
	// argv, raw and ints are reused buffers of the direct path.
	argv [4 + maxOpKeys + maxOpNums]any
	raw  bytes.Buffer
	ints []int64

	// A set's slot group (famSet, set.go): keys, parts, head numbers and
	// command alone; keys[0] is its first key. sout, the caller's answer
	// buffer, goes back with the reply (reply.set): a caller who left is
	// never written to.
	skeys  []string
	sparts []setPart
	sheld  []setHold // its held parts (ReserveSet), books last in skeys
	sid    string    // the reservation's id when sheld is not empty
	shead  [setHeadLen]int64
	sargv  []any
	sout   []int64
}

// answer checks a decoded reply against the cost and completes it.
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

// cmdArgs is r's command, slots 0 and 1 left for the name and SHA.
func (r *request) cmdArgs() []any {
	if r.fam == famSet {
		return r.setArgs()
	}
	return r.appendArgs(r.appendKeys(append(r.argv[:0], nil, nil, r.nkeys)))
}

func (r *request) appendKeys(dst []any) []any {
	for i := 0; i < r.nkeys; i++ {
		dst = append(dst, &r.keys[i])
	}
	return dst
}

func (r *request) appendArgs(dst []any) []any {
	for i := 0; i < r.idAt; i++ {
		dst = append(dst, &r.args[i])
	}
	if r.isOp() {
		dst = append(dst, &r.id)
	}
	for i := r.idAt; i < r.nargs; i++ {
		dst = append(dst, &r.args[i])
	}
	return dst
}

// isOp reports whether r is an operation other than a decision.
func (r *request) isOp() bool { return r.fam >= famReserve }

// run sends EVALSHA of sc with args (EVAL on NOSCRIPT) and reads the
// integers of its reply into dst.
func (s *Store) run(ctx context.Context, via processor, sc *script, args []any, raw *bytes.Buffer, dst []int64) ([]int64, error) {
	args[0], args[1] = "evalsha", sc.shaArg
	ints, err := s.call(ctx, via, args, raw, dst)
	if isNoScript(err) {
		args[0], args[1] = "eval", sc.srcArg
		ints, err = s.call(ctx, via, args, raw, dst)
	}
	return ints, err
}

// processor sends commands: the client, or one of its connections.
type processor interface {
	Process(ctx context.Context, cmd redis.Cmder) error
	Pipeline() redis.Pipeliner
}

// call sends one script command. On a single server the reply is read
// raw (resp.go) into a reused buffer: go-redis's typed reply costs an
// allocation per element, which TestGoalDecisionAllocatesLittle would see.
// On a Cluster the typed reply is what lets go-redis follow MOVED and ASK.
func (s *Store) call(ctx context.Context, via processor, args []any, raw *bytes.Buffer, dst []int64) ([]int64, error) {
	if s.durability > 0 {
		return s.callWait(ctx, via, args, raw, dst, 1)
	}
	if s.typedReplies {
		cmd := redis.NewCmd(ctx, args...)
		cmd.SetFirstKeyPos(3)
		_ = via.Process(ctx, scriptCmd{cmd})
		if err := cmd.Err(); err != nil {
			return dst[:0], err
		}
		return anyInts(cmd.Val(), dst)
	}
	raw.Reset()
	cmd := redis.NewRawWriteToCmd(ctx, raw, args...)
	cmd.SetFirstKeyPos(3)
	_ = via.Process(ctx, cmd)
	if err := cmd.Err(); err != nil {
		return dst[:0], err
	}
	return parseInts(raw.Bytes(), dst)
}

// callWait is call then the durable commands in one pipeline
// (DurabilityWait), for a script making writes decisions' writes.
func (s *Store) callWait(ctx context.Context, via processor, args []any, raw *bytes.Buffer, dst []int64, writes int) ([]int64, error) {
	raw.Reset()
	cmd := redis.NewRawWriteToCmd(ctx, raw, args...)
	cmd.SetFirstKeyPos(3)
	dl, _ := ctx.Deadline()
	role, wait := s.sendDurable(ctx, via, dl, []redis.Cmder{cmd}, []*bytes.Buffer{raw})
	if err := cmd.Err(); err != nil {
		return dst[:0], err
	}
	if !ranScript(raw) {
		writes = 0 // an error reply (NOSCRIPT): the caller sends it again
	}
	s.durableDone(role, wait, writes)
	return parseInts(raw.Bytes(), dst)
}
