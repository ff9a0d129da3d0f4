package redisstore

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// update makes TestGeneratedScriptsAreCurrent write lua/generated (go
// generate runs it so).
var update = flag.Bool("update", false, "write lua/generated from lua/*.lua")

const regenerate = "go generate ./limiter/redisstore/"

// redisClock is how the scripts read the clock.
const redisClock = "redis.call('TIME')"

// TestGeneratedScriptsAreCurrent holds lua/generated to what
// wantGenerated makes of lua/*.lua now: the store runs those files as
// they are, so a change to a source part shows here until they are
// written again.
func TestGeneratedScriptsAreCurrent(t *testing.T) {
	want, err := wantGenerated()
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := writeGenerated(want); err != nil {
			t.Fatal(err)
		}
	}
	for path, src := range want {
		got, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("%v: run %s", err, regenerate)
			continue
		}
		if string(got) != src {
			t.Errorf("%s is not what lua/*.lua make: run %s", path, regenerate)
		}
	}
	files, err := filepath.Glob("lua/generated/*")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if _, ok := want[filepath.ToSlash(f)]; !ok {
			t.Errorf("%s is no script of the store: run %s", f, regenerate)
		}
	}
}

// wantGenerated is every file of lua/generated, by path: each
// algorithm's decision, reservation and settle scripts and their batches,
// and the lease scripts.
func wantGenerated() (map[string]string, error) {
	want := map[string]string{}
	for _, spec := range limiter.AlgorithmSpecs() {
		a := spec.Algorithm()
		single, batch, err := scriptSources(spec, redisClock)
		if err != nil {
			return nil, err
		}
		reserve, settle, reserveBatch, renew, err := reservationSources(spec, redisClock)
		if err != nil {
			return nil, err
		}
		for i, src := range []string{single, batch} {
			want[generatedPath(a, decideKinds[i])] = src
		}
		for i, src := range []string{reserve, settle, reserveBatch, renew} {
			want[generatedPath(a, reserveKinds[i])] = src
		}
	}
	body, err := luaFiles.ReadFile("lua/concurrency.lua")
	if err != nil {
		return nil, err
	}
	acquire, release, batch, renew := leaseSources(string(body), redisClock)
	for i, src := range []string{acquire, release, batch, renew} {
		want[generatedPath(limiter.Concurrency, leaseKinds[i])] = src
	}
	if want[setPath], err = setSource(redisClock); err != nil {
		return nil, err
	}
	return want, nil
}

// TestStoreSendsTheGeneratedScripts holds the scripts the store sends to
// the files of lua/generated, byte for byte.
func TestStoreSendsTheGeneratedScripts(t *testing.T) {
	file := func(a limiter.Algorithm, kind string) string {
		b, err := os.ReadFile(generatedPath(a, kind))
		if err != nil {
			t.Fatalf("%v: run %s", err, regenerate)
		}
		return string(b)
	}
	check := func(a limiter.Algorithm, kind string, sc *script) {
		t.Helper()
		if want := file(a, kind); sc.src != want || sc.sha != newScript(want).sha {
			t.Errorf("the store's %s %s script is not %s", a, kind, generatedPath(a, kind))
		}
	}
	decide, err := loadScripts()
	if err != nil {
		t.Fatal(err)
	}
	reserve, err := loadReserveScripts()
	if err != nil {
		t.Fatal(err)
	}
	lease, err := leaseScripts()
	if err != nil {
		t.Fatal(err)
	}
	for _, spec := range limiter.AlgorithmSpecs() {
		a, i := spec.Algorithm(), spec.Index()
		check(a, decideKinds[0], &decide[i].single)
		check(a, decideKinds[1], &decide[i].batch)
		check(a, reserveKinds[0], &reserve[i].reserve)
		check(a, reserveKinds[1], &reserve[i].settle)
		check(a, reserveKinds[2], &reserve[i].batch)
		check(a, reserveKinds[3], &reserve[i].renew)
	}
	check(limiter.Concurrency, leaseKinds[0], lease.single[kindAcquire])
	check(limiter.Concurrency, leaseKinds[1], lease.single[kindRelease])
	check(limiter.Concurrency, leaseKinds[2], lease.batch)
	check(limiter.Concurrency, leaseKinds[3], lease.single[kindLeaseRenew])
}

// writeGenerated replaces lua/generated with want's files.
func writeGenerated(want map[string]string) error {
	if err := os.RemoveAll("lua/generated"); err != nil {
		return err
	}
	if err := os.MkdirAll("lua/generated", 0o755); err != nil {
		return err
	}
	for path, src := range want {
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// scriptSources assembles spec's two scripts from the preamble, its
// DecideFunction, lua/run.lua and a main part that reads the clock once
// (clock: redisClock, or arguments in tests): single makes one decision;
// batch, from its decideValues and lua/batch_run.lua, many in order (see
// encoder), with decide_values twice: plain, and with lua/batch.lua's
// cache as redis for the decisions sharing a key.
func scriptSources(spec *limiter.AlgorithmSpec, clock string) (single, batch string, err error) {
	return assemble(spec, clock, speedOff{})
}

// speedOff switches the batch script's speed mechanisms off, one by one,
// for BenchmarkSpeedMechanisms.
type speedOff struct {
	cache bool // every decision on Redis, none on lua/batch.lua's cache
	// args: each decision's own arguments after its key's index, read
	// per decision (encodePlain), not parameter sets and one code each.
	args bool
}

func assemble(spec *limiter.AlgorithmSpec, clock string, off speedOff) (single, batch string, err error) {
	a := spec.Algorithm()
	read := func(name string) (string, error) {
		b, err := luaFiles.ReadFile("lua/" + name + ".lua")
		if err != nil {
			return "", fmt.Errorf("script for %s: %w", a, err)
		}
		return string(b), nil
	}
	decide, err := DecideFunction(a)
	if err != nil {
		return "", "", err
	}
	values, err := decideValues(a)
	if err != nil {
		return "", "", err
	}
	var run, batchRun, helpers string
	for name, dst := range map[string]*string{"run": &run, "batch_run": &batchRun, "batch": &helpers} {
		if *dst, err = read(name); err != nil {
			return "", "", err
		}
	}
	if strings.Contains(decide, redisClock) {
		return "", "", fmt.Errorf("script for %s reads the clock itself; decide is given now", a)
	}
	na := spec.NumParams() + 2
	header := "-- Code generated by " + regenerate + " from lua/preamble.lua, lua/" + string(a) + ".lua and lua/run.lua. DO NOT EDIT.\n"
	readClock := "local clock = " + clock + "\n" +
		"local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])\n"
	single = header + preamble + decide + run + readClock + "return run(KEYS, ARGV, " + strconv.Itoa(na) + ", now)\n"

	var b strings.Builder
	b.WriteString("-- Code generated by " + regenerate + " from lua/preamble.lua, lua/" + string(a) + ".lua, lua/batch_run.lua and lua/batch.lua. DO NOT EDIT.\n")
	b.WriteString(preamble)
	b.WriteString(readClock)
	b.WriteString(helpers)
	cache := !uncached[a] && !off.cache
	b.WriteString("local runPlain, runCached\ndo\n")
	b.WriteString(values + batchRun)
	b.WriteString("runPlain = run\nend\n")
	if cache {
		b.WriteString("do\nlocal redis = cached\n")
		b.WriteString(values + batchRun)
		b.WriteString("runCached = run\nend\n")
	}
	if off.args {
		writePlainLoop(&b, spec.NumKeys(), spec.NumParams(), cache)
	} else {
		writeBatchLoop(&b, spec.NumKeys(), spec.NumParams(), cache)
	}
	return single, b.String(), nil
}

// writeBatchLoop writes the batch script's main loop, which reads what
// encoder writes: it converts each parameter set (parameters, cost, mode)
// to numbers once, then runs each decision on its key and set (with the
// cache when its key is shared), unrolled for nk keys and np parameters,
// writing its five integers into the reply. One keys table serves every
// decision: decide_values keeps no reference to it.
func writeBatchLoop(b *strings.Builder, nk, np int, cache bool) {
	list := func(format string, n int) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = fmt.Sprintf(format, i+1)
		}
		return strings.Join(parts, ", ")
	}
	fmt.Fprintf(b, "local nk = %d\n", nk)
	b.WriteString("local n, nsets, shared = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])\n")
	b.WriteString("local sets, costs, modes, a = {}, {}, {}, 3\nfor p = 1, nsets do\n")
	fmt.Fprintf(b, "  sets[p] = {%s}\n", list("tonumber(ARGV[a + %d])", np))
	fmt.Fprintf(b, "  costs[p], modes[p] = tonumber(ARGV[a + %d]), tonumber(ARGV[a + %d])\n  a = a + %d\nend\n", np+1, np+2, np+2)
	b.WriteString(`local kt, out = {}, {}
for o = 0, (n - 1) * 5, 5 do
  a = a + 1
  local code = tonumber(ARGV[a])
  local p = code % nsets
  local k = (code - p) / nsets
  local ko = k * nk
`)
	fmt.Fprintf(b, "  %s = %s\n", list("kt[%d]", nk), list("KEYS[ko + %d]", nk))
	b.WriteString("  p = p + 1\n")
	if cache {
		b.WriteString("  local run = runPlain\n  if k < shared then run = runCached end\n")
	} else {
		b.WriteString("  local run = runPlain\n")
	}
	fmt.Fprintf(b, "  %s = run(kt, sets[p], now, costs[p], modes[p])\n", list("out[o + %d]", replyLen))
	b.WriteString("end\n")
	if cache {
		b.WriteString("flushAll()\n")
	}
	b.WriteString("return out\n")
}

// uncached are the algorithms whose commands lua/batch.lua's cache cannot
// answer (sliding_log's sorted set; held to the scripts by a test). The cache
// reads and writes a hot key once per call (BenchmarkDecideConcurrent keys=1).
var uncached = map[limiter.Algorithm]bool{limiter.SlidingLog: true}

// writePlainLoop is writeBatchLoop for encodePlain's arguments.
func writePlainLoop(b *strings.Builder, nk, np int, cache bool) {
	list := func(format string, n, from int) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = fmt.Sprintf(format, i+from)
		}
		return strings.Join(parts, ", ")
	}
	fmt.Fprintf(b, "local nk = %d\n", nk)
	b.WriteString("local n, shared = tonumber(ARGV[1]), tonumber(ARGV[2])\n")
	b.WriteString(`local kt, out, a = {}, {}, 2
for o = 0, (n - 1) * 5, 5 do
  local k = tonumber(ARGV[a + 1])
  local ko = k * nk
`)
	fmt.Fprintf(b, "  %s = %s\n", list("kt[%d]", nk, 1), list("KEYS[ko + %d]", nk, 1))
	fmt.Fprintf(b, "  local argv = {%s}\n", list("tonumber(ARGV[a + %d])", np, 2))
	fmt.Fprintf(b, "  local cost, mode = tonumber(ARGV[a + %d]), tonumber(ARGV[a + %d])\n  a = a + %d\n", np+2, np+3, np+3)
	b.WriteString("  local run = runPlain\n")
	if cache {
		b.WriteString("  if k < shared then run = runCached end\n")
	}
	fmt.Fprintf(b, "  %s = run(kt, argv, now, cost, mode)\n", list("out[o + %d]", replyLen, 1))
	b.WriteString("end\n")
	if cache {
		b.WriteString("flushAll()\n")
	}
	b.WriteString("return out\n")
}

// encodePlain writes g's call for writePlainLoop: the distinct keys as
// encode does, then n, shared and, per decision, its key's index and its
// own arguments.
func encodePlain(e *encoder, dst []any, sc *algScripts, g *group) []any {
	na := sc.nargs
	e.first, e.count, e.key = e.first[:0], e.count[:0], e.key[:0]
	if e.byKey == nil {
		e.byKey, e.bySet = make(map[string]int), make(map[[maxArgs]int64]int)
	}
	clear(e.byKey)
	for i, r := range g.members {
		k, ok := e.byKey[r.keys[0]]
		if !ok {
			k = len(e.first)
			e.byKey[r.keys[0]] = k
			e.first = append(e.first, i)
			e.count = append(e.count, 0)
		}
		e.count[k]++
		e.key = append(e.key, k)
	}
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
	e.nums = append(e.nums, int64(len(g.members)), int64(shared))
	dst = append(dst, &e.nums[head], &e.nums[head+1])
	for i, r := range g.members {
		e.nums = append(e.nums, int64(e.rank[e.key[i]]))
		dst = append(dst, &e.nums[len(e.nums)-1])
		for j := 0; j < na; j++ {
			dst = append(dst, &r.args[j])
		}
	}
	return dst
}

// reservationSources assembles spec's reserve, settle, batch and renew scripts:
// the preamble, its decide function, lua/run.lua, the settle section of
// lua/<a>.lua (mark, adjust), lua/reservations.lua and, for the batch,
// lua/reservations_batch.lua, reading the clock once.
func reservationSources(spec *limiter.AlgorithmSpec, clock string) (reserve, settle, batch, renew string, err error) {
	a := spec.Algorithm()
	decide, err := DecideFunction(a)
	if err != nil {
		return "", "", "", "", err
	}
	adjust, err := algorithmSection(a, "settle")
	if err != nil {
		return "", "", "", "", err
	}
	var parts [4]string
	for i, name := range []string{"run", "reservations", "reservations_batch", "book"} {
		b, err := luaFiles.ReadFile("lua/" + name + ".lua")
		if err != nil {
			return "", "", "", "", fmt.Errorf("reservation script for %s: %w", a, err)
		}
		parts[i] = string(b)
	}
	run, reservations, main, book := parts[0], parts[1], parts[2], parts[3]
	body := preamble + decide + run + adjust +
		"local clock = " + clock + "\n" +
		"local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])\n" +
		"local nk, np = " + strconv.Itoa(spec.NumKeys()) + ", " + strconv.Itoa(spec.NumParams()) + "\n" +
		book + reservations
	files := "lua/preamble.lua, lua/" + string(a) + ".lua, lua/run.lua, lua/book.lua, lua/reservations.lua"
	header := "-- Code generated by " + regenerate + " from " + files + ". DO NOT EDIT.\n"
	batchHeader := "-- Code generated by " + regenerate + " from " + files + " and lua/reservations_batch.lua. DO NOT EDIT.\n"
	return header + body + "return reserve(KEYS, ARGV)\n", header + body + "return settle(KEYS, ARGV)\n",
		batchHeader + body + main, header + body + "return renew(KEYS, ARGV)\n", nil
}

// leaseSources assembles the acquire, release, batch and renew scripts from
// lua/concurrency.lua's lease function, reading the clock once. A batch
// takes each call's key in KEYS and ARGV as encoder.encodeOps writes them, a set
// being limit and TTL (µs); it answers five integers a call (lease's four
// and 0).
func leaseSources(body, clock string) (acquire, release, batch, renew string) {
	head := "-- Code generated by " + regenerate + " from lua/concurrency.lua. DO NOT EDIT.\n" +
		"local clock = " + clock + "\n" +
		"local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])\n" + body
	acquire = head + "return {lease(KEYS[1], 0, ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]))}\n"
	release = head + "return {lease(KEYS[1], 1, ARGV[1], 0, 0)}\n"
	renew = head + "return {lease(KEYS[1], 2, ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]))}\n"
	batch = head + `local n, nsets = tonumber(ARGV[1]), tonumber(ARGV[2])
local sets, a = {}, 3
for s = 1, nsets do
  sets[s] = {tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])}
  a = a + 1 + tonumber(ARGV[a])
end
local out = {}
for i = 1, n do
  local set = sets[tonumber(ARGV[a + 1]) + 1]
  local o = (i - 1) * 5
  out[o + 1], out[o + 2], out[o + 3], out[o + 4] = lease(KEYS[i], tonumber(ARGV[a]), ARGV[a + 3], set[1], set[2])
  out[o + 5] = 0
  a = a + 4
end
return out
`
	return acquire, release, batch, renew
}

// TestAlgorithmFilesHoldDecideThenSettle holds each algorithm's Lua file
// to its two sections, decide then settle, and no other line a section
// could start at: such a line would cut the section before it short.
func TestAlgorithmFilesHoldDecideThenSettle(t *testing.T) {
	for _, a := range limiter.AllAlgorithms() {
		src, err := luaFiles.ReadFile("lua/" + string(a) + ".lua")
		if err != nil {
			t.Fatal(err)
		}
		var marks []string
		for _, line := range strings.Split(string(src), "\n") {
			if strings.HasPrefix(line, sectionMark) {
				marks = append(marks, strings.TrimPrefix(line, sectionMark))
			}
		}
		if !slices.Equal(marks, []string{"decide", "settle"}) {
			t.Errorf("%s.lua has the sections %q, want decide then settle", a, marks)
		}
		for _, name := range marks {
			if body, err := algorithmSection(a, name); err != nil || strings.TrimSpace(body) == "" {
				t.Errorf("%s.lua's %s section: %q, %v", a, name, body, err)
			}
		}
	}
}
