package redisstore

// What operations besides decisions (reservations, leases) have of their
// own: their scripts and their encoding in a batch call (see batch.go).

import (
	"context"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// Script families, request.fam: an algorithm's decisions (its
// AlgorithmSpec.Index), its reservation calls (famReserve + the index),
// lease calls (famLease), sets (famSet, set.go). A batch makes one script
// call per family and slot.
const (
	famReserve = limiter.NumAlgorithms
	famLease   = 2 * limiter.NumAlgorithms
)

// opScripts are one family's scripts besides decisions (an algorithm's
// reservations, leases): each kind of call's alone, by request.kind, and
// the batch script, which answers opWidth integers a call.
type opScripts struct {
	single [3]*script
	batch  *script
}

// opWidth is the integers a batch script answers per call: as many as a
// decision's, so that one reply decoder reads every family.
const opWidth = replyLen

// Sizes of a request's arrays: the most keys and integer arguments of a
// reservation call (an algorithm's, then its book; its parameters, cost
// and mode, then hold, policy and keep).
const (
	maxOpKeys = maxKeys + 1
	maxOpNums = maxArgs + 3
)

func (s *Store) singleScript(r *request) *script {
	switch {
	case r.fam < famReserve:
		return &s.algs[r.fam].single
	case r.fam < famLease:
		return s.resv[r.fam-famReserve].ops.single[r.kind]
	case r.fam == famSet:
		return s.sets
	default:
		return s.leases.single[r.kind]
	}
}

func (s *Store) batchScript(fam int) *script {
	switch {
	case fam < famReserve:
		return &s.algs[fam].batch
	case fam < famLease:
		return s.resv[fam-famReserve].ops.batch
	case fam == famSet:
		return s.sets
	default:
		return s.leases.batch
	}
}

// addKey and addNums append to r's keys and integer arguments, addSet to
// the numbers it shares with others in a batch.
func (r *request) addKey(k string) { r.keys[r.nkeys] = k; r.nkeys++ }

func (r *request) addNums(vs ...int64) { r.nargs += copy(r.args[r.nargs:], vs) }

func (r *request) addSet(vs ...int64) { r.nset += copy(r.set[r.nset:], vs) }

func (r *request) sameSet(o *request) bool { return r.nset == o.nset && r.set == o.set }

func (s *Store) newOp(fam int, kind int64) *request {
	r := s.requests.Get().(*request)
	r.fam, r.kind, r.nkeys, r.nargs, r.nset = fam, kind, 0, 0, 0
	r.s = s
	return r
}

func (s *Store) slotted(r *request) {
	if s.cluster {
		r.slot = keySlot(r.keys[0])
	}
}

// op makes operation r, alone or batched as a decision is, and returns
// its integers; r goes back to the pool.
func (s *Store) op(ctx context.Context, r *request, timeout time.Duration) ([opWidth]int64, int, error) {
	rep := s.send(ctx, r, timeout)
	return rep.ints, rep.n, rep.err
}

// postOp sends operation r without its caller waiting: queued in a batch
// (post), or made at once on a store that does not batch. finish gets
// its answer, on whichever goroutine had it, and recycles r.
func (s *Store) postOp(ctx context.Context, r *request, timeout time.Duration, finish func(r *request)) {
	if !s.async.add() {
		r.err = ErrClosed
		finish(r)
		return
	}
	if s.batch == nil {
		rep := s.direct(ctx, r, timeout)
		r.err, r.nout = rep.err, copy(r.out[:], rep.ints[:rep.n])
		finish(r)
		s.async.done()
		return
	}
	r.then = finish
	s.batch.post(ctx, r, timeout)
}

// encodeOps appends g's command to dst, a batch of operations, each
// distinct set of shared numbers once:
//
//	EVALSHA sha numkeys <each op's keys> n nsets <per set: its length, its numbers>
//	    <per op: kind, set index (from 0), value, id>
func (e *encoder) encodeOps(dst []any, sc *script, g *group) []any {
	sets := e.sets[:0] // member index of each distinct set's first op
	g.numKeys = 0
	ops := g.members
	for i, op := range ops {
		g.numKeys += int64(op.nkeys)
		if i > 0 && op.sameSet(ops[i-1]) {
			op.setIndex = ops[i-1].setIndex
			continue
		}
		op.setIndex = -1
		for si, first := range sets {
			if op.sameSet(ops[first]) {
				op.setIndex = int64(si)
				break
			}
		}
		if op.setIndex < 0 {
			op.setIndex = int64(len(sets))
			sets = append(sets, i)
		}
	}
	e.sets = sets
	dst = append(dst, "evalsha", sc.shaArg, &g.numKeys)
	for _, op := range ops {
		dst = op.appendKeys(dst)
	}
	head := len(e.nums)
	e.nums = append(e.nums, int64(len(ops)), int64(len(sets)))
	dst = append(dst, &e.nums[head], &e.nums[head+1])
	for _, first := range sets {
		op := ops[first]
		e.nums = append(e.nums, int64(op.nset))
		dst = append(dst, &e.nums[len(e.nums)-1])
		for j := 0; j < op.nset; j++ {
			dst = append(dst, &op.set[j])
		}
	}
	for _, op := range ops {
		dst = append(dst, &op.kind, &op.setIndex, &op.value, &op.id)
	}
	return dst
}
