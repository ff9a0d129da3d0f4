package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/limiter"
)

// BenchmarkBatchScript measures what Redis spends per decision inside the
// batch scripts, with no batching layer around them: one connection sends
// EVALSHA of full batches (DefaultBatchMaxSize decisions) over 10,000 keys
// (keys=distinct: no key twice in a batch) or one key (keys=1: every
// decision through the script's cache). redis-µs/op is the redis-server's
// CPU (INFO used_cpu_sys + used_cpu_user) per decision, robust under load.
func BenchmarkBatchScript(b *testing.B) {
	srv := redistest.Single(b)
	// A busy machine may hold a call for seconds: the figure is CPU.
	store := NewTestStore(b, ClientConfig{URL: srv.URL(), ReadTimeout: time.Minute, WriteTimeout: time.Minute}, Config{})
	for _, a := range limiter.AllAlgorithms() {
		for _, nkeys := range []int{10000, 1} {
			name := "keys=distinct"
			if nkeys == 1 {
				name = "keys=1"
			}
			b.Run(fmt.Sprintf("%s/%s", a, name), func(b *testing.B) {
				benchBatchScript(b, srv, store, a, nkeys)
			})
		}
	}
	// The floor: what a decision's one GET and one SET PX and its reply of
	// five integers cost in a script, to compare gcra with on the same
	// machine at the same time.
	b.Run("floor/keys=distinct", func(b *testing.B) {
		keys, _ := batchCalls(store, limiter.GCRA, 10000, DefaultBatchMaxSize)
		args := make([][]any, len(keys))
		benchCalls(b, srv, store, floorScript, keys, args)
	})
}

const floorScript = `local out, now = {}, 1750000000123457
for i = 1, #KEYS do
  local tat = tonumber(redis.call('GET', KEYS[i])) or now
  redis.call('SET', KEYS[i], tat + 0.5, 'PX', 1000)
  local o = (i - 1) * 5
  out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5] = 1, 999, 10, 0, 0
end
return out
`

// costLimit is a's limit in BenchmarkBatchScript: every decision
// allowed, and a key's state lives on between its decisions (a bucket
// refills or drains at one unit a second; a window lasts a minute), as
// with real traffic, where Redis reads and writes a key that exists.
func costLimit(a limiter.Algorithm) limiter.Limit {
	if limiter.SpecOf(a).Bucket() {
		return limiter.Limit{Algorithm: a, Rate: 1, Period: time.Second, Burst: 1_000_000_000}
	}
	return limiter.Limit{Algorithm: a, Rate: 1_000_000_000, Period: time.Minute}
}

// batchCalls builds the batch-script calls of n decisions per call on
// keys taken in turn from nkeys, enough calls to cycle through them.
func batchCalls(s *Store, a limiter.Algorithm, nkeys, n int) (keys [][]string, args [][]any) {
	lim := costLimit(a)
	calls := max(nkeys/n, 1)
	for c := 0; c < calls; c++ {
		reqs := make([]*request, n)
		for i := range reqs {
			key := "user:batch" + strconv.Itoa((c*n+i)%nkeys)
			reqs[i] = newRequest(s, key, lim, 1, limiter.ModeConsume)
		}
		k, a := batchCall(s, reqs)
		keys, args = append(keys, k), append(args, a)
	}
	return keys, args
}

func benchBatchScript(b *testing.B, srv *redistest.Server, s *Store, a limiter.Algorithm, nkeys int) {
	keys, args := batchCalls(s, a, nkeys, DefaultBatchMaxSize)
	benchCalls(b, srv, s, s.scriptsOf(a).batch.src, keys, args)
}

// benchCalls runs src with keys[i] and args[i] in turn, b.N decisions of
// DefaultBatchMaxSize per call, and reports Redis's CPU per decision.
func benchCalls(b *testing.B, srv *redistest.Server, s *Store, src string, keys [][]string, args [][]any) {
	benchCallsOf(b, srv, s, src, keys, args, DefaultBatchMaxSize)
}

// benchCallsOf is benchCalls with n decisions (or sets) a call, and
// returns the Redis µs per decision it reports.
func benchCallsOf(b *testing.B, srv *redistest.Server, s *Store, src string, keys [][]string, args [][]any, n int) float64 {
	ctx := context.Background()
	sc := newScript(src)
	call := func(i int) {
		err := s.client.EvalSha(ctx, sc.sha, keys[i%len(keys)], args[i%len(keys)]...).Err()
		if isNoScript(err) {
			err = s.client.Eval(ctx, sc.src, keys[i%len(keys)], args[i%len(keys)]...).Err()
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	for i := range keys { // every key exists: the steady state
		call(i)
	}
	calls := max(b.N/n, 1)
	cpu0 := redisCPUOf(b, srv)
	b.ResetTimer()
	for i := 0; i < calls; i++ {
		call(i)
	}
	b.StopTimer()
	cpu := redisCPUOf(b, srv) - cpu0
	us := cpu * 1e6 / float64(calls*n)
	b.ReportMetric(us, "redis-µs/op")
	return us
}

// redisCPUOf is the CPU time (s) srv has used, from INFO cpu.
func redisCPUOf(b *testing.B, srv *redistest.Server) float64 {
	b.Helper()
	info, err := srv.Info("cpu")
	if err != nil {
		b.Fatalf("INFO: %v", err)
	}
	var cpu float64
	for _, k := range []string{"used_cpu_sys", "used_cpu_user"} {
		f, err := strconv.ParseFloat(info[k], 64)
		if err != nil {
			b.Fatalf("INFO %s: %v", k, err)
		}
		cpu += f
	}
	return cpu
}

// BenchmarkBatchScriptSpeed is BenchmarkBatchScript on the loads each of
// the batch scripts' speed mechanisms is for, with the mechanism on (the
// scripts as they run) and off (SwitchOff): what it saves Redis per
// decision, without the batching layer's noise around it.
func BenchmarkBatchScriptSpeed(b *testing.B) {
	srv := redistest.Single(b)
	type load struct {
		alg   limiter.Algorithm
		nkeys int
	}
	loads := map[string][]load{
		"cache":        {{limiter.GCRA, 1}, {limiter.FixedWindow, 1}},
		"compact-args": {{limiter.GCRA, 10000}, {limiter.GCRA, 1}},
	}
	for _, m := range []string{"cache", "compact-args"} {
		for _, l := range loads[m] {
			name := "keys=distinct"
			if l.nkeys == 1 {
				name = "keys=1"
			}
			for _, state := range []string{"on", "off"} {
				b.Run(fmt.Sprintf("%s/%s/%s/%s", m, l.alg, name, state), func(b *testing.B) {
					store := NewTestStore(b, ClientConfig{URL: srv.URL(), ReadTimeout: time.Minute, WriteTimeout: time.Minute}, Config{})
					if state == "off" {
						if err := store.SwitchOff(m); err != nil {
							b.Fatal(err)
						}
					}
					benchBatchScript(b, srv, store, l.alg, l.nkeys)
				})
			}
		}
	}
}

// BenchmarkSetScript measures what Redis spends on a set of rl-exporter
// bench --limits 3 (gcra 1,000,000/m per client, a token_bucket of 7 a
// request per client, a fixed_window calendar month per organisation of
// 100, or one key for all: limits=3,global) inside the set script, and,
// in the same run, on one batched gcra
// decision of the first limit, each in calls of 32 as 64 callers make
// them, over 10,000 clients. x_one_limit, the ratio of the two, is what
// --limits 3's ratio would be were Redis its only cost: without this
// process's CPU and the batching layer's noise, which at 64 callers on
// two cores move the bench's ratio by ±0.04. floor=one_hash is the same
// sets on the layout proposed to beat that (see oneHashFloor), and
// floor=one_string the least any layout keeping a set atomic could cost
// (see oneStringFloor). Each sub-benchmark runs after the other: on a
// noisy machine run the test binary several times with -count 1 and
// compare within a run.
//
//	go test -run '^$' -bench BenchmarkSetScript ./limiter/redisstore/
func BenchmarkSetScript(b *testing.B) {
	srv := redistest.Single(b)
	// A busy machine may hold a call for seconds: the figure is CPU.
	store := NewTestStore(b, ClientConfig{URL: srv.URL(), ReadTimeout: time.Minute, WriteTimeout: time.Minute}, Config{})
	const clients, orgs, perCall = 10000, 100, 32
	lims := []limiter.Limit{
		{Algorithm: limiter.GCRA, Rate: 1_000_000, Period: time.Minute},
		{Algorithm: limiter.TokenBucket, Rate: 7_000_000, Period: time.Minute},
		limiter.PerCalendar(1<<40, &limiter.Calendar{Unit: limiter.Month, Location: time.UTC}),
	}
	costs := []int64{1, 7, 1}
	var oneUS float64
	b.Run("one_limit", func(b *testing.B) {
		var keys [][]string
		var args [][]any
		for c := 0; c < clients/perCall; c++ {
			reqs := make([]*request, perCall)
			for i := range reqs {
				reqs[i] = newRequest(store, "client:"+strconv.Itoa(c*perCall+i), lims[0], 1, limiter.ModeConsume)
			}
			k, a := batchCall(store, reqs)
			keys, args = append(keys, k), append(args, a)
		}
		oneUS = benchCallsOf(b, srv, store, store.scriptsOf(limiter.GCRA).batch.src, keys, args, perCall)
	})
	for _, orgs := range []int{orgs, 1} {
		name := "limits=3"
		if orgs == 1 {
			name += ",global" // the month one key for every client: scope global
		}
		b.Run(name, func(b *testing.B) { benchSetScript(b, srv, store, lims, costs, clients, orgs, perCall, oneUS) })
	}
	b.Run("limits=3,floor=one_hash", func(b *testing.B) { benchFloor(b, srv, store, "one_hash", oneHashFloor, clients, orgs, perCall, oneUS) })
	b.Run("limits=3,floor=one_string", func(b *testing.B) {
		benchFloor(b, srv, store, "one_string", oneStringFloor, clients, orgs, perCall, oneUS)
	})
}

// benchSetScript is BenchmarkSetScript's sets of lims at costs, the third
// limit's key one of orgs, in calls of perCall; oneUS is one decision's
// cost to report the ratio against.
func benchSetScript(b *testing.B, srv *redistest.Server, store *Store, lims []limiter.Limit, costs []int64, clients, orgs, perCall int, oneUS float64) {
	sc, err := setScript()
	if err != nil {
		b.Fatal(err)
	}
	var keys [][]string
	var args [][]any
	for c := 0; c < clients/perCall; c++ {
		var sets [][]limiter.Part
		for i := range perCall {
			client := c*perCall + i
			parts := make([]limiter.Part, len(lims))
			for j, lim := range lims {
				parts[j] = limiter.Part{Key: "client:" + strconv.Itoa(client), Limit: lim, Cost: costs[j]}
			}
			parts[2].Key = "org:" + strconv.Itoa(client%orgs)
			sets = append(sets, parts)
		}
		k, a := setCallOf(b, store, sets, limiter.ModeConsume)
		keys, args = append(keys, k), append(args, a)
	}
	setUS := benchCallsOf(b, srv, store, sc.src, keys, args, perCall)
	if oneUS > 0 {
		b.ReportMetric(oneUS/setUS, "x_one_limit")
	}
}

// oneHashFloor is a set of BenchmarkSetScript's three limits on the state
// layout docs/performance.md weighs for sets: the client's two limits in one hash
// (read by one HMGET, written by one HSET and a PEXPIRE), the month in
// its organisation's window hash (an HMGET, and an HSET of its count),
// with arithmetic of a few lines and the set's reply of 18 integers: what
// that layout could cost Redis at best, to weigh it before building it.
const oneHashFloor = `local out, now = {}, 1750000000123457
for i = 1, #KEYS, 2 do
  local s = redis.call('HMGET', KEYS[i], 'tat', 'l', 't')
  local tat = math.max(tonumber(s[1]) or now, now)
  local level, at = tonumber(s[2]) or 0, tonumber(s[3]) or now
  level = math.max(0, level - (now - at) * 7)
  local m = redis.call('HMGET', KEYS[i + 1], 'w', 'n', 'x')
  local n = tonumber(m[2]) or 0
  if tat + 60 - now <= 60000000 and level + 420000000 <= 420000000000000 and n < 1099511627776 then
    redis.call('HSET', KEYS[i], 'tat', tat + 60, 'l', level + 420000000, 't', now)
    redis.call('PEXPIRE', KEYS[i], 60000)
    redis.call('HSET', KEYS[i + 1], 'n', n + 1)
  end
  local o = (i - 1) * 9
  for j = 1, 18 do out[o + j] = j end
end
return out
`

// oneStringFloor is the least a set of BenchmarkSetScript's three limits
// could cost Redis on any layout that keeps a set atomic: the client's two
// limits packed in one string (a GET and a SET with its expiry, as one
// gcra decision), the month a counter per window (one INCRBY, taken back
// on a refusal; its expiry set once a window, so never here).
const oneStringFloor = `local out, now = {}, 1750000000123457
for i = 1, #KEYS, 2 do
  local s = redis.call('GET', KEYS[i])
  local tat, level = now, 0
  if s then
    local sep = string.find(s, ':', 1, true)
    tat, level = math.max(tonumber(string.sub(s, 1, sep - 1)), now), tonumber(string.sub(s, sep + 1))
  end
  level = math.max(0, level - 7)
  if tat + 60 - now <= 60000000 and level + 420000000 <= 420000000000000 then
    local n = redis.call('INCRBY', KEYS[i + 1], 1)
    if n <= 1099511627776 then
      redis.call('SET', KEYS[i], (tat + 60) .. ':' .. (level + 420000000), 'PX', 60000)
    else
      redis.call('DECRBY', KEYS[i + 1], 1)
    end
  end
  local o = (i - 1) * 9
  for j = 1, 18 do out[o + j] = j end
end
return out
`

// benchFloor runs a floor script (oneHashFloor, oneStringFloor) over
// BenchmarkSetScript's clients and organisations, in calls of perCall
// sets, on keys of its own (name).
func benchFloor(b *testing.B, srv *redistest.Server, store *Store, name, floor string, clients, orgs, perCall int, oneUS float64) {
	var keys [][]string
	var args [][]any
	for c := 0; c < clients/perCall; c++ {
		var k []string
		for i := range perCall {
			client := c*perCall + i
			k = append(k, name+":client:"+strconv.Itoa(client), name+":org:"+strconv.Itoa(client%orgs))
		}
		keys, args = append(keys, k), append(args, nil)
	}
	us := benchCallsOf(b, srv, store, floor, keys, args, perCall)
	if oneUS > 0 {
		b.ReportMetric(oneUS/us, "x_one_limit")
	}
}
