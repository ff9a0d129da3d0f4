package redisstore

import "slices"

// encoder writes a group's batch-script call, each distinct key and each
// distinct set of arguments (limit parameters, cost and mode) once:
//
//	EVALSHA sha numkeys <the distinct keys, nkeys each>
//	    n sets shared <the sets' arguments, one set after another>
//	    <per decision, in the members' order: code>
//
// where code = key index × sets + set index (from 0): one argument per
// decision, and a set the script converts to numbers once. The keys more
// than one decision uses come first and run with the script's cache
// (lua/batch.lua). Pointers into the requests and nums box without
// allocating. The zero value is ready; one sender uses it.
type encoder struct {
	nums  []int64                // n, sets, shared and the codes, pointed to by args
	byKey map[string]int         // distinct key index by first key
	bySet map[[maxArgs]int64]int // set index by arguments (zero beyond the algorithm's)
	first []int                  // member index of each distinct key's first decision
	count []int                  // decisions per distinct key
	rank  []int                  // distinct key index → position in KEYS
	sets  []int                  // member index of each distinct set's first decision
	key   []int                  // per member: distinct key index
	set   []int                  // per member: set index
	// bySpec and specs are encodeSets': a spec's index, the distinct specs.
	bySpec map[[setSpecLen]int64]int
	specs  []*setPart
}

// reserve sizes nums so that pointers into it stay valid.
func (e *encoder) reserve(groups []group) {
	n := 0
	for gi := range groups {
		n += 3 + len(groups[gi].members)
	}
	e.nums = slices.Grow(e.nums[:0], n)
}

// encode appends g's command to dst.
func (e *encoder) encode(dst []any, sc *algScripts, g *group) []any {
	na := sc.nargs
	e.first, e.count, e.sets = e.first[:0], e.count[:0], e.sets[:0]
	e.key, e.set = e.key[:0], e.set[:0]
	if e.byKey == nil {
		e.byKey, e.bySet = make(map[string]int), make(map[[maxArgs]int64]int)
	}
	clear(e.byKey)
	clear(e.bySet)
	for i, r := range g.members {
		// The same key and limit as before: a hot key.
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
		if i > 0 && slices.Equal(r.args[:na], g.members[i-1].args[:na]) {
			p = e.set[i-1]
		} else {
			var params [maxArgs]int64
			copy(params[:na], r.args[:na])
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
		for j := 0; j < na; j++ {
			dst = append(dst, &r.args[j])
		}
	}
	nsets := int64(len(e.sets))
	for i := range g.members {
		e.nums = append(e.nums, int64(e.rank[e.key[i]])*nsets+int64(e.set[i]))
		dst = append(dst, &e.nums[len(e.nums)-1])
	}
	return dst
}
