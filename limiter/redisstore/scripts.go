package redisstore

import (
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// Preamble is lua/preamble.lua, what every decision script starts with
// (the store's and package region's): integer helpers and regions, nil
// until region's scripts set it. Safe for concurrent use.
func Preamble() string { return preamble }

// DecideFunction is the Lua function decide(KEYS, ARGV, now, cost, peek)
// of algorithm a, lua/<a>.lua: the one copy of its arithmetic in Lua,
// which reads and writes one region's keys, or, once regions is set,
// per-region slots, and answers a table. Safe for concurrent use.
func DecideFunction(a limiter.Algorithm) (string, error) {
	values, err := decideValues(a)
	if err != nil {
		return "", err
	}
	return values + "local function decide(KEYS, ARGV, now, cost, peek)\n" +
		"  return {decide_values(KEYS, ARGV, now, cost, peek)}\nend\n", nil
}

// decideValues is the Lua function decide_values(KEYS, ARGV, now, cost,
// peek) of algorithm a, lua/<a>.lua, which answers decide's table as
// values: the batch script writes them into its reply without a table per
// decision.
func decideValues(a limiter.Algorithm) (string, error) {
	body, err := luaFiles.ReadFile("lua/" + string(a) + ".lua")
	if err != nil {
		return "", fmt.Errorf("script for %s: %w", a, err)
	}
	return "local function decide_values(KEYS, ARGV, now, cost, peek)\n" + string(body) + "end\n", nil
}

//go:embed lua/preamble.lua
var preamble string

// redisClock is how the scripts read the clock.
const redisClock = "redis.call('TIME')"

// script is one Lua script and its SHA1.
type script struct {
	src string
	sha string
	// srcArg and shaArg are boxed once: a command then does not allocate.
	srcArg, shaArg any
}

func newScript(src string) script {
	h := sha1.Sum([]byte(src))
	sha := hex.EncodeToString(h[:])
	return script{src: src, sha: sha, srcArg: src, shaArg: sha}
}

// algScripts are an algorithm's spec and scripts.
type algScripts struct {
	spec   *limiter.AlgorithmSpec
	single script
	batch  script
	// keySuffixes is spec.KeySuffixes(), copied once.
	keySuffixes []string
	// nkeys and nargs count one decision's keys and arguments.
	nkeys, nargs int
}

// maxKeys and maxArgs size a request's arrays (see loadScripts).
const (
	maxKeys = 2
	maxArgs = 9
)

// scriptSources assembles spec's two scripts from the preamble, its
// DecideFunction, lua/run.lua and a main part that reads the clock once
// (clock: redisClock, or arguments in tests): single makes one decision;
// batch, from its decideValues and lua/batch_run.lua, many in order (see
// encoder), with decide_values twice: plain, and with lua/batch.lua's
// cache as redis for the decisions sharing a key.
func scriptSources(spec *limiter.AlgorithmSpec, clock string) (single, batch string, err error) {
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
	header := "-- Code generated from lua/preamble.lua, lua/" + string(a) + ".lua and lua/run.lua by rl-exporter. DO NOT EDIT.\n"
	readClock := "local clock = " + clock + "\n" +
		"local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])\n"
	single = header + preamble + decide + run + readClock + "return run(KEYS, ARGV, " + strconv.Itoa(na) + ", now)\n"

	var b strings.Builder
	b.WriteString("-- Code generated from lua/preamble.lua, lua/" + string(a) + ".lua, lua/batch_run.lua and lua/batch.lua by rl-exporter. DO NOT EDIT.\n")
	b.WriteString(preamble)
	b.WriteString(readClock)
	b.WriteString(helpers)
	cache, fetch := !uncached[a], prefetched[a]
	if fetch && spec.NumKeys() != 1 {
		return "", "", fmt.Errorf("script for %s: prefetching needs one key per decision, not %d", a, spec.NumKeys())
	}
	b.WriteString("local runPlain, runCached\ndo\n")
	if fetch {
		b.WriteString("local redis = fetched\n")
	}
	b.WriteString(values + batchRun)
	b.WriteString("runPlain = run\nend\n")
	if cache {
		b.WriteString("do\nlocal redis = cached\n")
		b.WriteString(values + batchRun)
		b.WriteString("runCached = run\nend\n")
	}
	writeBatchLoop(&b, spec.NumKeys(), spec.NumParams(), cache, fetch)
	return single, b.String(), nil
}

// writeBatchLoop writes the batch script's main loop, which reads what
// encoder writes: it converts each parameter set (parameters, cost, mode)
// to numbers once, then runs each decision on its key and set (with the
// cache when its key is shared), unrolled for nk keys and np parameters,
// writing its five integers into the reply. One keys table serves every
// decision: decide_values keeps no reference to it. With fetch it first
// reads the keys that come once (see fetched in lua/batch.lua).
func writeBatchLoop(b *strings.Builder, nk, np int, cache, fetch bool) {
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
	if fetch {
		b.WriteString("if #KEYS > shared then fetch(shared + 1) end\n")
	}
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

// prefetched are the algorithms whose decide reads its one key with one
// GET (gcra's TAT), which the batch script reads for all the keys that
// come once in a call with one MGET (fetched in lua/batch.lua).
var prefetched = map[limiter.Algorithm]bool{limiter.GCRA: true}

// loadScripts builds every algorithm's scripts from lua/*.lua, indexed
// by AlgorithmSpec.Index.
func loadScripts() ([limiter.NumAlgorithms]algScripts, error) {
	var all [limiter.NumAlgorithms]algScripts
	for _, spec := range limiter.AlgorithmSpecs() {
		single, batch, err := scriptSources(spec, redisClock)
		if err != nil {
			return all, err
		}
		sc := algScripts{spec: spec, single: newScript(single), batch: newScript(batch),
			keySuffixes: spec.KeySuffixes(), nkeys: spec.NumKeys(), nargs: spec.NumParams() + 2}
		if sc.nkeys > maxKeys || sc.nargs > maxArgs {
			return all, fmt.Errorf("script for %s: %d keys and %d arguments, more than the %d and %d a request holds", spec, sc.nkeys, sc.nargs, maxKeys, maxArgs)
		}
		all[spec.Index()] = sc
	}
	return all, nil
}

// argsInto appends a decision's ARGV to dst: the algorithm's parameters,
// the cost and the mode (limiter.Mode's values).
func argsInto(dst []int64, spec *limiter.AlgorithmSpec, key string, lim limiter.Limit, cost int64, mode limiter.Mode) []int64 {
	return append(spec.AppendParams(dst, key, lim), cost, int64(mode))
}
