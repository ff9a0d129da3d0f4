package redisstore

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// setPath is the set script as sent: lua/set.lua after the preamble and
// every algorithm's decide and settle sections (set_gen_test.go).
const setPath = "lua/generated/set.lua"

var setScript = sync.OnceValues(func() (*script, error) {
	b, err := generatedFiles.ReadFile(setPath)
	if err != nil {
		return nil, fmt.Errorf("set script: %w", err)
	}
	sc := newScript(string(b))
	return &sc, nil
})

// setReplyLen is the number of integers the set script answers per part.
const setReplyLen = 6

// setGiveBack is the set script's mode that gives back a take.
const setGiveBack = 3

// famSet is the family of set requests (see famReserve).
const famSet = famLease + 1

// setSpecLen is the length of a part's spec: its algorithm's index, its
// number of parameters, the parameters.
const setSpecLen = 2 + maxArgs

// setPart is one part of a set's slot group as its request carries it
// (request.parts), in the numbers the set script reads.
type setPart struct {
	spec  [setSpecLen]int64
	index int64 // its spec's index in the call
	cost  int64
	mark  int64 // a take's mark, to give back (mode 3)
}

// setHold is one held part of a set's slot group (ReserveSet) as its
// request carries it (request.sheld), in the numbers the set script reads.
type setHold struct {
	index  int64 // the part's index in the group, from 1
	policy int64 // limiter.ReserveRequest.OnExpiry
	hold   int64 // µs
	keep   int64 // ms: how long past the hold the record may matter
}

// Indexes of request.shead: mode, parts, held parts and, for a call of the
// set alone, keys and sets (1).
const (
	headMode = iota
	headParts
	headHeld
	headKeys
	headSets
	setHeadLen
)

// DecideSet implements limiter.SetStore. Off a Cluster the set is one
// request over every part's keys, batched with the store's other requests:
// a batch's sets share one call of lua/set.lua, which decides them in
// turn, each peeking every part and taking only when all admit, atomically,
// on Redis's clock, each part's state read once.
//
// On a Cluster the parts sharing a slot (one user key's parts under any
// algorithms: the key is the hash tag) are one request on their master's
// lane. Parts in several slots (a per-organisation or global limit beside
// per-client ones) are decided group by group at once, one round trip for
// all, each taking as it admits; when a group refuses or fails, what the
// others took is given back (the settle arithmetic of reservations) and
// every part answers as peeked. A peek of several groups is one call per
// group, not one snapshot.
//
// Bound of the cross-slot set: no overshoot. A group's take is counted from
// before the set is answered until it is given back, and the give-back
// leaves the state exactly as if never taken (buckets, gcra), returns to
// the window charged (fixed_window, sliding_window; a passed window needs
// none) or removes the members scored at the take (sliding_log). The
// undershoot, refusals the parts would have admitted, is bounded by the
// takes in flight: at most one cost per part of an admitting group per
// concurrent cross-slot set that another group refuses, for that round trip
// and the give-back's (TestCluster's cross-slot set, 64 clients whose
// users' quotas bind: about 210–230 refusals by the organisation's part
// under its quota, no unit past a quota, none short by the end). A failed
// give-back (node unreachable) leaves its take counted, an undershoot of
// that cost until the window or bucket recovers; the set still answers
// refused, without an error.
func (s *Store) DecideSet(ctx context.Context, parts []limiter.Part, mode limiter.Mode, timeout time.Duration, out []limiter.Decision) (bool, error) {
	return s.decideSet(ctx, parts, mode, nil, timeout, out)
}

// ReserveSet implements limiter.SetReserver: DecideSet's script call (one
// per slot group on a Cluster) also opens the reservation in each held
// part's book, under the part's hash tag, as the reserve script does; a
// cross-slot set's give-back drops what the earlier groups opened.
func (s *Store) ReserveSet(ctx context.Context, parts []limiter.Part, holds []limiter.ReserveRequest, timeout time.Duration, out []limiter.Decision) (bool, error) {
	if len(holds) != len(parts) {
		return false, fmt.Errorf("redis store: %d holds for %d parts", len(holds), len(parts))
	}
	return s.decideSet(ctx, parts, limiter.ModeConsume, holds, timeout, out)
}

// decideSet is DecideSet, opening holds' reservations (nil: none).
func (s *Store) decideSet(ctx context.Context, parts []limiter.Part, mode limiter.Mode, holds []limiter.ReserveRequest, timeout time.Duration, out []limiter.Decision) (bool, error) {
	if err := limiter.CheckSet(parts, mode, out); err != nil {
		return false, fmt.Errorf("redis store: %w", err)
	}
	for i, p := range parts {
		if err := checkCall(limiter.SpecOf(p.Limit.Algorithm), p.Limit, p.Cost); err != nil {
			return false, fmt.Errorf("part %d: %w", i, err)
		}
	}
	c := setCalls.Get().(*setCall)
	defer c.recycle()
	c.s, c.parts, c.out, c.holds = s, parts, out, holds
	for _, h := range holds {
		if h.ID != "" {
			c.id = h.ID
		}
	}
	groups := c.groups()
	if len(groups) == 1 {
		ints, err := c.run(ctx, timeout, groups[0], int64(mode))
		if err != nil {
			return false, err
		}
		return c.answer(groups[0], ints, mode)
	}
	if dl, ok := ctx.Deadline(); timeout > 0 && (!ok || time.Until(dl) > timeout) {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	return c.crossSlot(ctx, groups, mode)
}

// setCall is one DecideSet on its way, with the buffers its calls reuse:
// setCalls pools them, so that a set allocates its keys and nothing per
// argument (TestSetOfThreeLimitsAllocatesLittle).
type setCall struct {
	s     *Store
	parts []limiter.Part
	out   []limiter.Decision
	marks []int64                  // a take's marks, by part (cross-slot)
	holds []limiter.ReserveRequest // ReserveSet's, by part; nil for DecideSet
	id    string                   // the id of holds, "" when none is held
	// ints is the answers' buffer (see send; nil: lent to a request its caller left).
	ints []int64
	all  []int
	one  [1][]int
}

var setCalls = sync.Pool{New: func() any { return new(setCall) }}

// recycle drops c's references to the caller's values and pools c.
func (c *setCall) recycle() {
	c.s, c.parts, c.out, c.marks, c.holds, c.id = nil, nil, nil, nil, nil, ""
	setCalls.Put(c)
}

// groups are the parts' indexes by Cluster slot, in the order of their
// first parts; one group of all off a Cluster.
func (c *setCall) groups() [][]int {
	c.all = c.all[:0]
	for i := range c.parts {
		c.all = append(c.all, i)
	}
	if !c.s.cluster {
		c.one[0] = c.all
		return c.one[:]
	}
	var groups [][]int
	var slots []int
	for i, p := range c.parts {
		slot := keySlot(c.s.baseKey(p.Key, p.Limit.Algorithm))
		g := 0
		for g < len(slots) && slots[g] != slot {
			g++
		}
		if g == len(slots) {
			slots = append(slots, slot)
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], i)
	}
	return groups
}

// run sends group's parts in mode (with their marks, giving back) as one
// request (Store.send) within ctx and timeout (> 0), and returns its answer.
func (c *setCall) run(ctx context.Context, timeout time.Duration, group []int, mode int64) ([]int64, error) {
	buf := c.ints
	c.ints = nil
	ints, err := c.send(ctx, timeout, group, mode, buf[:0])
	if err == nil {
		c.ints = ints
	}
	return ints, err
}

// send is run with buf, the buffer the answer is read into: lent to the
// request while it is on its way, so that run takes it back only from an
// answered call and concurrent groups each bring their own (nil).
func (c *setCall) send(ctx context.Context, timeout time.Duration, group []int, mode int64, buf []int64) ([]int64, error) {
	s := c.s
	r := c.request(group, mode)
	first := r.skeys[0]
	r.sout = buf
	rep := s.send(ctx, r, timeout)
	if rep.err != nil {
		return nil, fmt.Errorf("redis set script for %s: %w", first, rep.err)
	}
	if len(rep.set) != setReplyLen*len(group) {
		return nil, fmt.Errorf("redis set script: unexpected reply of %d integers for %d parts", len(rep.set), len(group))
	}
	return rep.set, nil
}

// request is group's parts in mode as the set request send sends.
func (c *setCall) request(group []int, mode int64) *request {
	s := c.s
	r := s.newOp(famSet, 0)
	for _, i := range group {
		p := c.parts[i]
		alg := &s.algs[limiter.SpecOf(p.Limit.Algorithm).Index()]
		base := s.baseKey(p.Key, p.Limit.Algorithm)
		for _, suffix := range alg.keySuffixes {
			r.skeys = append(r.skeys, base+suffix) // the empty suffix allocates nothing
		}
		r.sparts = append(r.sparts, setPart{cost: p.Cost})
		sp := &r.sparts[len(r.sparts)-1]
		sp.spec[0], sp.spec[1] = int64(alg.spec.Index()), int64(alg.spec.NumParams())
		alg.spec.AppendParams(sp.spec[2:2], p.Key, p.Limit)
		if c.marks != nil {
			sp.mark = c.marks[i]
		}
	}
	if mode != int64(limiter.ModePeek) {
		c.appendHolds(r, group)
	}
	r.shead = [setHeadLen]int64{headMode: mode, headParts: int64(len(group)), headHeld: int64(len(r.sheld)), headKeys: int64(len(r.skeys)), headSets: 1}
	// The first key names the request's slot and lane.
	r.addKey(r.skeys[0])
	s.slotted(r)
	return r
}

// width is the integers r's script answers: six a set's part, else five.
func (r *request) width() int {
	if r.fam == famSet {
		return setReplyLen * len(r.sparts)
	}
	return replyLen
}

// setArgs is the command of r, a set's slot group, alone: every part
// its own spec. Slots 0 and 1 are left for the name and SHA.
func (r *request) setArgs() []any {
	args := append(r.sargv[:0], nil, nil, &r.shead[headKeys])
	for k := range r.skeys {
		args = append(args, &r.skeys[k])
	}
	args = append(args, &r.shead[headSets], &r.shead[headParts])
	for i := range r.sparts {
		p := &r.sparts[i]
		p.index = int64(i)
		args = p.appendSpec(args)
	}
	r.sargv = r.appendSetParts(args)
	return r.sargv
}

func (p *setPart) appendSpec(dst []any) []any {
	for j := 0; j < 2+int(p.spec[1]); j++ {
		dst = append(dst, &p.spec[j])
	}
	return dst
}

// appendSetParts appends pointers to r's per-set numbers (see encodeSets).
func (r *request) appendSetParts(dst []any) []any {
	dst = append(dst, &r.shead[headMode], &r.shead[headParts], &r.shead[headHeld])
	for i := range r.sparts {
		p := &r.sparts[i]
		dst = append(dst, &p.index, &p.cost)
		if r.shead[headMode] == setGiveBack {
			dst = append(dst, &p.mark)
		}
	}
	if len(r.sheld) == 0 {
		return dst
	}
	dst = append(dst, &r.sid)
	for i := range r.sheld {
		h := &r.sheld[i]
		dst = append(dst, &h.index, &h.policy, &h.hold, &h.keep)
	}
	return dst
}

// encodeSets appends g's command to dst, a batch of sets' slot groups,
// each distinct spec once:
//
//	EVALSHA sha numkeys <each set's keys> nsets nspecs <per spec: its numbers>
//	    <per set: mode, nparts, nheld, <per part: spec index (from 0), cost[, mark]>
//	    [id <per held part: index (from 1), policy, hold, keep>]>
//
// Sets of one limiter.Set repeat the specs of the set before, found
// without the map.
func (e *encoder) encodeSets(dst []any, sc *script, g *group) []any {
	if e.bySpec == nil {
		e.bySpec = make(map[[setSpecLen]int64]int)
	}
	clear(e.bySpec)
	e.specs = e.specs[:0]
	g.numKeys = 0
	var prev *request
	for _, r := range g.members {
		g.numKeys += int64(len(r.skeys))
		for i := range r.sparts {
			p := &r.sparts[i]
			if prev != nil && i < len(prev.sparts) && prev.sparts[i].spec == p.spec {
				p.index = prev.sparts[i].index
				continue
			}
			si, ok := e.bySpec[p.spec]
			if !ok {
				si = len(e.specs)
				e.bySpec[p.spec] = si
				e.specs = append(e.specs, p)
			}
			p.index = int64(si)
		}
		prev = r
	}
	dst = append(dst, "evalsha", sc.shaArg, &g.numKeys)
	for _, r := range g.members {
		for k := range r.skeys {
			dst = append(dst, &r.skeys[k])
		}
	}
	head := len(e.nums)
	e.nums = append(e.nums, int64(len(g.members)), int64(len(e.specs)))
	dst = append(dst, &e.nums[head], &e.nums[head+1])
	for _, p := range e.specs {
		dst = p.appendSpec(dst)
	}
	clear(e.specs)
	for _, r := range g.members {
		dst = r.appendSetParts(dst)
	}
	return dst
}

// appendHolds puts on r group's reservation (ReserveSet), if any: its id,
// a setHold per held part, and each book after the parts' keys.
func (c *setCall) appendHolds(r *request, group []int) {
	if c.id == "" {
		return
	}
	r.sid = c.id
	for g, i := range group {
		h := c.holds[i]
		if h.ID == "" {
			continue
		}
		p := c.parts[i]
		hold := h.Hold
		if hold <= 0 {
			hold = limiter.DefaultHold
		}
		r.sheld = append(r.sheld, setHold{index: int64(g + 1), policy: int64(h.OnExpiry), hold: hold.Microseconds(), keep: 2 * p.Limit.Window().Milliseconds()})
		r.skeys = append(r.skeys, c.s.baseKey(p.Key, p.Limit.Algorithm)+bookSuffix)
	}
}

// answer writes group's answers from ints to out and reports whether every
// part admitted; a consumed set's admitted parts keep their marks.
func (c *setCall) answer(group []int, ints []int64, mode limiter.Mode) (bool, error) {
	allowed := true
	for g, i := range group {
		n := ints[g*setReplyLen : (g+1)*setReplyLen]
		for j, x := range n[:5] {
			if x < 0 {
				return false, fmt.Errorf("redis set script: unexpected reply: part %d's element %d is %d", i, j, x)
			}
		}
		p := c.parts[i]
		if n[0] > p.Cost {
			return false, fmt.Errorf("redis set script: unexpected reply: %d units admitted for a cost of %d", n[0], p.Cost)
		}
		c.out[i] = limiter.Decision{
			Allowed:    n[0] > 0,
			Limit:      p.Limit.Quota(),
			Remaining:  n[1],
			ResetAfter: time.Duration(n[2]) * time.Microsecond,
			RetryAfter: time.Duration(n[3]) * time.Microsecond,
			Delay:      time.Duration(n[4]) * time.Microsecond,
		}
		allowed = allowed && n[0] > 0
		if c.marks != nil {
			c.marks[i] = n[5]
		}
	}
	if allowed && mode == limiter.ModeConsume {
		for _, i := range group {
			c.out[i].Admitted = c.parts[i].Cost
		}
	}
	return allowed, nil
}

// crossSlot decides groups at once (see DecideSet).
func (c *setCall) crossSlot(ctx context.Context, groups [][]int, mode limiter.Mode) (bool, error) {
	if mode == limiter.ModePeek {
		allowed := true
		for _, g := range groups {
			ints, err := c.run(ctx, 0, g, int64(mode))
			if err != nil {
				return false, err
			}
			ok, err := c.answer(g, ints, mode)
			if err != nil {
				return false, err
			}
			allowed = allowed && ok
		}
		return allowed, nil
	}
	c.marks = make([]int64, len(c.parts))
	answers, errs := c.takeAll(ctx, groups)
	allowed, took := true, make([][]int, 0, len(groups))
	var firstErr error
	for k, g := range groups {
		ok, err := false, errs[k]
		if err == nil {
			ok, err = c.answer(g, answers[k], mode)
		}
		switch {
		case err != nil:
			// The failed group may have taken: what it took, the store
			// cannot know. The others' takes are given back.
			firstErr = cmp.Or(firstErr, err)
		case ok:
			took = append(took, g)
		default:
			allowed = false
		}
	}
	if allowed && firstErr == nil {
		return true, nil
	}
	c.giveBack(ctx, took)
	return false, firstErr
}

// takeAll sends every group's take at once, the first from this goroutine,
// so a set over several slots costs one round trip; answers and errors by group.
func (c *setCall) takeAll(ctx context.Context, groups [][]int) ([][]int64, []error) {
	answers, errs := make([][]int64, len(groups)), make([]error, len(groups))
	var wg sync.WaitGroup
	for k := 1; k < len(groups); k++ {
		wg.Go(func() {
			answers[k], errs[k] = c.send(ctx, 0, groups[k], int64(limiter.ModeConsume), nil)
		})
	}
	answers[0], errs[0] = c.run(ctx, 0, groups[0], int64(limiter.ModeConsume))
	wg.Wait()
	return answers, errs
}

// giveBack returns what groups took, each then answering as peeked; a
// group whose give-back fails keeps its take's answers, without Admitted.
func (c *setCall) giveBack(ctx context.Context, groups [][]int) {
	if len(groups) == 0 {
		return
	}
	// A give-back is owed whatever the caller's deadline: bound it apart.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), giveBackTimeout)
	defer cancel()
	for _, g := range groups {
		ints, err := c.run(ctx, 0, g, setGiveBack)
		if err == nil {
			_, err = c.answer(g, ints, limiter.ModePeek)
		}
		if err != nil {
			for _, i := range g {
				c.out[i].Admitted = 0
			}
		}
	}
}

// giveBackTimeout bounds the calls that give back a cross-slot set's takes.
const giveBackTimeout = time.Second
