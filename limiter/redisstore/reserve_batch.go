package redisstore

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"time"
)

// opScripts are the scripts of one kind of keyed call besides decisions
// (reservations of an algorithm, leases): the script of each kind of call
// alone, by scriptOp.kind, and the batch of many calls in one, which
// answers opWidth integers a call.
type opScripts struct {
	single [3]*script
	batch  *script
}

// opWidth is the integers a batch script answers per call.
const opWidth = 5

// Sizes of a scriptOp's arrays: the most keys and integer arguments of a
// reservation call (an algorithm's, then its book; its parameters, cost
// and mode, then hold, policy and keep).
const (
	maxOpKeys = maxKeys + 1
	maxOpNums = maxArgs + 3
)

// scriptOp is one call on its way: its keys, its arguments alone
// (nums[:idAt], id, nums[idAt:]) and in a batch (the numbers it shares
// with others, set, then value and id), then its answer. Ops are pooled
// and send their fields by pointer, so that a call allocates little more
// than its keys.
type scriptOp struct {
	kind  int64 // the script's kind of call: 0, 1 or 2
	keys  [maxOpKeys]string
	nkeys int
	nums  [maxOpNums]int64
	nnums int
	id    string
	idAt  int
	set   [maxOpNums]int64
	nset  int
	value int64
	// setIndex is the index of op's set in its batch, boxed by pointer.
	setIndex int64

	ctx      context.Context
	deadline time.Time // zero: ctx's alone
	timer    *time.Timer
	out      [opWidth]int64
	nout     int
	err      error
	done     chan struct{}
}

var scriptOps = sync.Pool{New: func() any { return &scriptOp{done: make(chan struct{}, 1)} }}

func newScriptOp() *scriptOp { return scriptOps.Get().(*scriptOp) }

// release puts op back in the pool; only once no sender can hold it.
func (op *scriptOp) release() {
	clear(op.keys[:op.nkeys])
	op.nkeys, op.nnums, op.nset, op.id, op.ctx, op.err, op.nout = 0, 0, 0, "", nil, nil, 0
	op.set = [maxOpNums]int64{}
	op.deadline = time.Time{}
	scriptOps.Put(op)
}

// addKey and addNums append to op's keys and integer arguments.
func (op *scriptOp) addKey(k string) { op.keys[op.nkeys] = k; op.nkeys++ }

func (op *scriptOp) addNums(vs ...int64) {
	op.nnums += copy(op.nums[op.nnums:], vs)
}

func (op *scriptOp) addSet(vs ...int64) {
	op.nset += copy(op.set[op.nset:], vs)
}

func (op *scriptOp) sameSet(o *scriptOp) bool {
	return op.nset == o.nset && op.set == o.set
}

// appendKeys and appendArgs append pointers to op's keys and arguments.
func (op *scriptOp) appendKeys(dst []any) []any {
	for i := 0; i < op.nkeys; i++ {
		dst = append(dst, &op.keys[i])
	}
	return dst
}

func (op *scriptOp) appendArgs(dst []any) []any {
	for i := 0; i < op.idAt; i++ {
		dst = append(dst, &op.nums[i])
	}
	dst = append(dst, &op.id)
	for i := op.idAt; i < op.nnums; i++ {
		dst = append(dst, &op.nums[i])
	}
	return dst
}

// maxOpBatch bounds the calls one batch script runs.
const maxOpBatch = 128

// opBatcher sends calls of one opScripts: one in progress alone, those
// that arrive meanwhile together in the next script call, so that
// concurrent callers share round trips and script runs as decisions do
// (batch.go). Its zero value is ready; safe for concurrent use.
type opBatcher struct {
	mu      sync.Mutex
	queue   []*scriptOp
	sending bool
	// args, raw, ints and enc are the buffers of the one sender at a time.
	args []any
	raw  bytes.Buffer
	ints []int64
	enc  setEncoder
}

// setEncoder writes a batch of ops, each distinct set of shared numbers
// once:
//
//	EVALSHA sha numkeys <each op's keys> n nsets <per set: its length, its numbers>
//	    <per op: kind, set index (from 0), value, id>
//
// The zero value is ready; one sender uses it.
type setEncoder struct {
	sets  []*scriptOp // the first op of each distinct set
	nums  []int64     // n, nsets and the sets' lengths, pointed to by args
	nkeys int64
}

func (e *setEncoder) encode(args []any, ops []*scriptOp) []any {
	e.sets = e.sets[:0]
	e.nkeys = 0
	for i, op := range ops {
		e.nkeys += int64(op.nkeys)
		if i > 0 && op.sameSet(ops[i-1]) {
			op.setIndex = ops[i-1].setIndex
			continue
		}
		op.setIndex = -1
		for si, first := range e.sets {
			if op.sameSet(first) {
				op.setIndex = int64(si)
				break
			}
		}
		if op.setIndex < 0 {
			op.setIndex = int64(len(e.sets))
			e.sets = append(e.sets, op)
		}
	}
	args = append(args, nil, nil, &e.nkeys)
	for _, op := range ops {
		args = op.appendKeys(args)
	}
	e.nums = append(e.nums[:0], int64(len(ops)), int64(len(e.sets)))
	for _, first := range e.sets {
		e.nums = append(e.nums, int64(first.nset))
	}
	args = append(args, &e.nums[0], &e.nums[1])
	for si, first := range e.sets {
		args = append(args, &e.nums[2+si])
		for j := 0; j < first.nset; j++ {
			args = append(args, &first.set[j])
		}
	}
	for _, op := range ops {
		args = append(args, &op.kind, &op.setIndex, &op.value, &op.id)
	}
	clear(e.sets)
	return args
}

// do queues op and waits for its answer, ctx or timeout (> 0). A call
// given up may still run: a reservation or lease it took then expires by
// its policy. op goes back to the pool once answered.
func (b *opBatcher) do(ctx context.Context, s *Store, sc *opScripts, op *scriptOp, timeout time.Duration) ([]int64, error) {
	op.ctx = ctx
	dl, bounded := ctx.Deadline()
	var expired <-chan time.Time
	if timeout > 0 && (!bounded || time.Until(dl) > timeout) {
		dl, bounded = time.Now().Add(timeout), true
		if op.timer == nil {
			op.timer = time.NewTimer(timeout)
		} else {
			op.timer.Reset(timeout)
		}
		expired = op.timer.C
	}
	if bounded {
		op.deadline = dl
	}
	b.mu.Lock()
	b.queue = append(b.queue, op)
	if !b.sending {
		b.sending = true
		go b.send(s, sc)
	}
	b.mu.Unlock()
	select {
	case <-op.done:
		if expired != nil {
			op.timer.Stop()
		}
		ints, err := op.out[:op.nout:op.nout], op.err
		var answer [opWidth]int64
		n := copy(answer[:], ints)
		op.release()
		return answer[:n], err
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-expired:
		return nil, context.DeadlineExceeded
	}
}

// send runs the queue until it is empty, maxOpBatch calls a script.
func (b *opBatcher) send(s *Store, sc *opScripts) {
	for {
		b.mu.Lock()
		ops := b.queue
		if len(ops) > maxOpBatch {
			ops = ops[:maxOpBatch:maxOpBatch]
		}
		b.queue = b.queue[len(ops):]
		if len(ops) == 0 {
			b.queue, b.sending = nil, false
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		ops, ctx, cancel := liveOps(ops)
		if len(ops) > 0 {
			b.args, b.ints = s.runOps(ctx, sc, ops, &b.enc, b.args[:0], &b.raw, b.ints[:0])
			clear(b.args)
		}
		cancel()
	}
}

// liveOps answers the ops whose caller gave up or whose deadline passed
// and returns the others with a context bounded by the latest of their
// deadlines, so that none is cut short; unbounded when one has none.
func liveOps(ops []*scriptOp) ([]*scriptOp, context.Context, context.CancelFunc) {
	now := time.Now()
	var latest time.Time
	unbounded := false
	live := ops[:0]
	for _, op := range ops {
		switch {
		case op.ctx.Err() != nil:
			op.answer(nil, op.ctx.Err())
			continue
		case op.deadline.IsZero():
			unbounded = true
		case !now.Before(op.deadline):
			op.answer(nil, context.DeadlineExceeded)
			continue
		case op.deadline.After(latest):
			latest = op.deadline
		}
		live = append(live, op)
	}
	if unbounded || len(live) == 0 {
		ctx, cancel := context.WithCancel(context.Background())
		return live, ctx, cancel
	}
	ctx, cancel := context.WithDeadline(context.Background(), latest)
	return live, ctx, cancel
}

// answer hands op its integers or error.
func (op *scriptOp) answer(ints []int64, err error) {
	op.nout = copy(op.out[:], ints)
	op.err = err
	op.done <- struct{}{}
}

// runOps runs one op with its own script, or many with the batch script,
// retrying TRYAGAIN, and answers each; it returns its buffers for reuse.
func (s *Store) runOps(ctx context.Context, sc *opScripts, ops []*scriptOp, enc *setEncoder, args []any, raw *bytes.Buffer, ints []int64) ([]any, []int64) {
	script := sc.batch
	if len(ops) == 1 {
		op := ops[0]
		script = sc.single[op.kind]
		args = op.appendArgs(op.appendKeys(append(args, nil, nil, int64(op.nkeys))))
	} else {
		args = enc.encode(args, ops)
	}
	var err error
	ints, err = s.run(ctx, s.client, script, args, raw, ints[:0])
	for backoff := tryAgainFirst; isTryAgain(err) && retryWait(ctx, backoff); backoff = min(2*backoff, tryAgainMax) {
		ints, err = s.run(ctx, s.client, script, args, raw, ints[:0])
	}
	if err == nil && len(ops) > 1 && len(ints) != opWidth*len(ops) {
		err = fmt.Errorf("unexpected reply of %d integers for %d calls", len(ints), len(ops))
	}
	if err != nil {
		s.noteError(err)
		for _, op := range ops {
			op.answer(nil, err)
		}
		return args, ints
	}
	if len(ops) == 1 {
		ops[0].answer(ints, nil)
		return args, ints
	}
	for i, op := range ops {
		op.answer(ints[opWidth*i:opWidth*i+opWidth], nil)
	}
	return args, ints
}
