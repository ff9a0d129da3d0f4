package redisstore

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// setPath is the set script as sent: lua/set.lua after the preamble and
// every algorithm's decide and settle sections (set_gen_test.go).
const setPath = "lua/generated/set.lua"

// setScript is the set script, read once.
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

// DecideSet implements limiter.SetStore. On a single server or through
// Sentinel the set is one script call over every part's keys (lua/set.lua):
// it peeks every part and takes only when all admit, atomically, on
// Redis's clock. Set calls are not batched with other decisions.
//
// On a Cluster, the parts whose keys share a slot (one user key's parts
// under any algorithms: the key is the hash tag) are one script call, as
// above. Parts in several slots (a per-organisation or global limit beside
// per-client ones) are decided slot group after slot group, each taking as
// it admits; when a later group refuses, or its call fails, what the
// earlier groups took is given back (the settle arithmetic of
// reservations), and every part then answers as if peeked. A peek of
// several groups is one call per group, not one snapshot.
//
// Bound of the cross-slot set: no overshoot. A group's take is counted in
// its state from before the set is answered until it is given back, so no
// part ever admits past its quota through a give-back: for the buckets
// and gcra the give-back leaves the state exactly as if never taken;
// fixed_window's and sliding_window's return to the window charged (a
// window since passed needs none); sliding_log's removes the members
// scored at the take. The undershoot, requests refused that the parts
// would have admitted, is bounded by the takes in flight: at most one cost
// per part of an earlier group per concurrent cross-slot set that a later
// group refuses, held for the later group's round trip and the give-back's
// (TestCluster's cross-slot set measures both: with 64 clients whose
// users' quotas bind, about 210 refusals by the organisation's part while
// its count was under its quota, no unit admitted past a quota, none left
// short by the end). A give-back that fails
// (the node unreachable) leaves its take counted, an undershoot of that
// cost until the window or bucket recovers; the set is still answered as
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
	sc, err := setScript()
	if err != nil {
		return false, fmt.Errorf("redis store: %w", err)
	}
	if dl, ok := ctx.Deadline(); timeout > 0 && (!ok || time.Until(dl) > timeout) {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	c := setCalls.Get().(*setCall)
	defer c.recycle()
	c.s, c.sc, c.parts, c.out, c.holds = s, sc, parts, out, holds
	for _, h := range holds {
		if h.ID != "" {
			c.id = h.ID
		}
	}
	groups := c.groups()
	if len(groups) == 1 {
		ints, err := c.run(ctx, groups[0], int64(mode))
		if err != nil {
			return false, err
		}
		return c.answer(groups[0], ints, mode)
	}
	return c.crossSlot(ctx, groups, mode)
}

// setCall is one DecideSet on its way, with the buffers its calls reuse:
// setCalls pools them, so that a set allocates its keys and command and
// nothing per argument (TestSetOfThreeLimitsAllocatesLittle).
type setCall struct {
	s     *Store
	sc    *script
	parts []limiter.Part
	out   []limiter.Decision
	marks []int64                  // a take's marks, by part (cross-slot)
	holds []limiter.ReserveRequest // ReserveSet's, by part; nil for DecideSet
	id    string                   // the id of holds, "" when none is held
	raw   bytes.Buffer
	ints  []int64
	// keys and nums are a call's keys and integer arguments, args the
	// command pointing into them (a pointer boxes without allocating).
	keys []string
	nums []int64
	args []any
	all  []int
	one  [1][]int
}

// setCalls pools setCalls.
var setCalls = sync.Pool{New: func() any { return new(setCall) }}

// recycle drops c's references to the caller's values and pools c.
func (c *setCall) recycle() {
	clear(c.keys)
	clear(c.args)
	c.s, c.sc, c.parts, c.out, c.marks, c.holds, c.id = nil, nil, nil, nil, nil, nil, ""
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

// run sends the set script over the parts of group in mode (with their
// marks to give back), again after TRYAGAIN (a migrating slot: nothing ran).
func (c *setCall) run(ctx context.Context, group []int, mode int64) ([]int64, error) {
	s := c.s
	c.keys = c.keys[:0]
	// nums: the number of keys, mode, the number of parts, then per part
	// its algorithm, numbers of keys and parameters, parameters, cost, mark.
	c.nums = append(c.nums[:0], 0, mode, int64(len(group)))
	for _, i := range group {
		p := c.parts[i]
		alg := &s.algs[limiter.SpecOf(p.Limit.Algorithm).Index()]
		base := s.baseKey(p.Key, p.Limit.Algorithm)
		for _, suffix := range alg.keySuffixes {
			c.keys = append(c.keys, base+suffix) // the empty suffix allocates nothing
		}
		c.nums = append(c.nums, int64(alg.spec.Index()), int64(alg.nkeys), int64(alg.spec.NumParams()))
		c.nums = alg.spec.AppendParams(c.nums, p.Key, p.Limit)
		var mark int64
		if c.marks != nil {
			mark = c.marks[i]
		}
		c.nums = append(c.nums, p.Cost, mark)
	}
	held := len(c.nums)
	if mode != int64(limiter.ModePeek) {
		c.appendHolds(group)
	}
	c.nums[0] = int64(len(c.keys))
	// c.nums is complete: pointers into it stay valid.
	args := append(c.args[:0], nil, nil, &c.nums[0])
	for k := range c.keys {
		args = append(args, &c.keys[k])
	}
	for k := 1; k < len(c.nums); k++ {
		if k == held {
			args = append(args, &c.id) // the trailer's first argument
		}
		args = append(args, &c.nums[k])
	}
	c.args = args
	ints, err := s.run(ctx, s.client, c.sc, args, &c.raw, c.ints[:0])
	for backoff := tryAgainFirst; isTryAgain(err) && retryWait(ctx, backoff); backoff = min(2*backoff, tryAgainMax) {
		ints, err = s.run(ctx, s.client, c.sc, args, &c.raw, ints)
	}
	if err != nil {
		s.noteError(err)
		return nil, fmt.Errorf("redis set script for %s: %w", c.keys[0], err)
	}
	if len(ints) != setReplyLen*len(group) {
		return nil, fmt.Errorf("redis set script: unexpected reply of %d integers for %d parts", len(ints), len(group))
	}
	c.ints = ints
	return ints, nil
}

// appendHolds appends, when group holds reservations (ReserveSet), the
// set script's trailer: their count and, per held part, its index in the
// group, expiry policy, hold (µs) and keep (ms), each book to the keys; the
// caller puts the id before the count.
func (c *setCall) appendHolds(group []int) {
	if c.id == "" {
		return
	}
	at := len(c.nums)
	for g, i := range group {
		h := c.holds
		if h[i].ID == "" {
			continue
		}
		if at == len(c.nums) {
			c.nums = append(c.nums, 0)
		}
		p := c.parts[i]
		hold := h[i].Hold
		if hold <= 0 {
			hold = limiter.DefaultHold
		}
		c.nums[at]++
		c.nums = append(c.nums, int64(g+1), int64(h[i].OnExpiry), hold.Microseconds(), 2*p.Limit.Window().Milliseconds())
		c.keys = append(c.keys, c.s.baseKey(p.Key, p.Limit.Algorithm)+bookSuffix)
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

// crossSlot decides groups one after another (see DecideSet).
func (c *setCall) crossSlot(ctx context.Context, groups [][]int, mode limiter.Mode) (bool, error) {
	if mode == limiter.ModePeek {
		allowed := true
		for _, g := range groups {
			ints, err := c.run(ctx, g, int64(mode))
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
	for k, g := range groups {
		ints, err := c.run(ctx, g, int64(limiter.ModeConsume))
		var ok bool
		if err == nil {
			ok, err = c.answer(g, ints, mode)
		}
		if err != nil {
			// The failed group may have taken: what it took, the store
			// cannot know. The earlier groups' takes are given back.
			c.giveBack(context.WithoutCancel(ctx), groups[:k])
			return false, err
		}
		if ok {
			continue
		}
		c.giveBack(ctx, groups[:k])
		for _, later := range groups[k+1:] {
			ints, err := c.run(ctx, later, int64(limiter.ModePeek))
			if err == nil {
				_, err = c.answer(later, ints, limiter.ModePeek)
			}
			if err != nil {
				return false, err
			}
		}
		return false, nil
	}
	return true, nil
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
		ints, err := c.run(ctx, g, setGiveBack)
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
