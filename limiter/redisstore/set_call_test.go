package redisstore

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rl-exporter/rl-exporter/limiter"
)

// setCallOf is the KEYS and ARGV of one set-script call deciding sets
// (each its parts) in mode, as a sender encodes them.
func setCallOf(t testing.TB, s *Store, sets [][]limiter.Part, mode limiter.Mode) (keys []string, args []any) {
	t.Helper()
	sc, err := setScript()
	if err != nil {
		t.Fatal(err)
	}
	g := group{fam: famSet}
	for _, parts := range sets {
		call := &setCall{s: s, parts: parts}
		g.members = append(g.members, call.request(call.groups()[0], int64(mode)))
	}
	var e encoder
	return unboxCall(e.encodeSets(nil, sc, &g), int(g.numKeys))
}

// Sets of one call share keys (every set of a class on its global limit,
// a busy organisation's on its month) and are decided one after another
// in it: the call answers each set and leaves every key (state and
// expiry) as the sets decided one by one do, parts taken, refused, and
// given back when a later part refuses.
func TestSetsOfOneCallAnswerAsOneByOne(t *testing.T) {
	srv, store := singleStore(t)
	ctx := context.Background()
	src, err := setSource(testClock)
	if err != nil {
		t.Fatal(err)
	}
	script := redis.NewScript(src)
	global := limiter.Limit{Algorithm: limiter.FixedWindow, Rate: 15, Period: time.Hour, AlignWindows: true}
	org := limiter.Limit{Algorithm: limiter.TokenBucket, Rate: 12, Period: time.Minute}
	client := limiter.Limit{Algorithm: limiter.GCRA, Rate: 1, Period: time.Minute}
	const n = 20
	setsIn := func(ns string, from, to int) [][]limiter.Part {
		var sets [][]limiter.Part
		for i := from; i < to; i++ {
			sets = append(sets, []limiter.Part{
				{Key: ns + "everyone", Limit: global, Cost: 1},
				{Key: ns + "org" + strconv.Itoa(i%2), Limit: org, Cost: 1},
				{Key: ns + "client" + strconv.Itoa(i%12), Limit: client, Cost: 1},
			})
		}
		return sets
	}
	clock := newInstants()
	run := func(sets [][]limiter.Part) []int64 {
		keys, args := setCallOf(t, store, sets, limiter.ModeConsume)
		reply, err := script.Run(ctx, store.client, keys, append(args, clock.clockArgs()...)...).Result()
		if err != nil {
			t.Fatalf("set script: %v", err)
		}
		ints, err := anyInts(reply, nil)
		if err != nil {
			t.Fatal(err)
		}
		return ints
	}
	for round := 0; round < 3; round++ {
		var oneByOne []int64
		for i := range n {
			oneByOne = append(oneByOne, run(setsIn("alone:", i, i+1))...)
		}
		together := run(setsIn("together:", 0, n))
		if !slices.Equal(together, oneByOne) {
			t.Fatalf("round %d: %d sets in one call answered\n%v\none by one\n%v", round, n, together, oneByOne)
		}
		for _, p := range setsIn("", 0, n)[0:12] {
			for _, part := range p {
				a, b := store.Keys("alone:"+part.Key, part.Limit.Algorithm)[0], store.Keys("together:"+part.Key, part.Limit.Algorithm)[0]
				sa, sb := storedState(t, srv, a), storedState(t, srv, b)
				if sa.value != sb.value || sa.expiry-sb.expiry > 50 || sb.expiry-sa.expiry > 50 || (sa.expiry < 0) != (sb.expiry < 0) {
					t.Fatalf("round %d: %s holds %s expiring at %d; one by one %s at %d", round, b, sb.value, sb.expiry, sa.value, sa.expiry)
				}
			}
		}
		clock.advance(int64(20 * time.Second / time.Microsecond))
	}
}
