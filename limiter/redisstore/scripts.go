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
// per-region slots. Safe for concurrent use.
func DecideFunction(a limiter.Algorithm) (string, error) {
	body, err := luaFiles.ReadFile("lua/" + string(a) + ".lua")
	if err != nil {
		return "", fmt.Errorf("script for %s: %w", a, err)
	}
	return "local function decide(KEYS, ARGV, now, cost, peek)\n" + string(body) + "end\n", nil
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
// (clock: redisClock, or arguments in tests): single makes one decision,
// batch many in order (see encoder), with decide twice: plain, and with
// lua/batch.lua's cache as redis for the decisions sharing a key.
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
	run, err := read("run")
	if err != nil {
		return "", "", err
	}
	helpers, err := read("batch")
	if err != nil {
		return "", "", err
	}
	if strings.Contains(decide, redisClock) {
		return "", "", fmt.Errorf("script for %s reads the clock itself; decide is given now", a)
	}
	nk, na := spec.NumKeys(), spec.NumParams()+2
	header := "-- Code generated from lua/preamble.lua, lua/" + string(a) + ".lua and lua/run.lua by rl-exporter. DO NOT EDIT.\n"
	decide += run
	readClock := "local clock = " + clock + "\n" +
		"local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])\n"
	single = header + preamble + decide + readClock + "return run(KEYS, ARGV, " + strconv.Itoa(na) + ", now)\n"

	var b strings.Builder
	b.WriteString("-- Code generated from lua/preamble.lua, lua/" + string(a) + ".lua, lua/run.lua and lua/batch.lua by rl-exporter. DO NOT EDIT.\n")
	b.WriteString(preamble)
	b.WriteString(readClock)
	b.WriteString(helpers)
	b.WriteString("local runPlain, runCached\ndo\n")
	b.WriteString(decide)
	b.WriteString("runPlain = run\nend\n")
	cache := !uncached[a]
	if cache {
		b.WriteString("do\nlocal redis = cached\n")
		b.WriteString(decide)
		b.WriteString("runCached = run\nend\n")
	}
	writeBatchLoop(&b, nk, spec.NumParams(), cache)
	return single, b.String(), nil
}

// writeBatchLoop writes the batch script's main loop, which reads what
// encoder writes and runs each decision with its key's and parameter set's
// tables (with the cache when its key is shared), unrolled for nk keys and
// np parameters, appending its five integers to the reply.
func writeBatchLoop(b *strings.Builder, nk, np int, cache bool) {
	list := func(format string, n int) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = fmt.Sprintf(format, i+1)
		}
		return strings.Join(parts, ", ")
	}
	na := np + 2
	fmt.Fprintf(b, "local nk, na = %d, %d\n", nk, na)
	b.WriteString("local n, nsets, shared = rtonumber(ARGV[1]), rtonumber(ARGV[2]), rtonumber(ARGV[3])\n")
	b.WriteString("local sets, a = {}, 3\nfor p = 1, nsets do\n")
	fmt.Fprintf(b, "  sets[p] = {%s}\n  a = a + %d\nend\n", list("ARGV[a + %d]", np), np)
	b.WriteString("local keys = {}\nfor k = 1, #KEYS / nk do\n  local o = (k - 1) * nk\n")
	fmt.Fprintf(b, "  keys[k] = {%s}\nend\n", list("KEYS[o + %d]", nk))
	b.WriteString(`local out = {}
for o = 0, (n - 1) * 5, 5 do
  local code = rtonumber(ARGV[a + 1])
  local mode = code % 3
  local kp = (code - mode) / 3
  local p = kp % nsets
  local k = (kp - p) / nsets
  local argv = sets[p + 1]
  argv[na - 1], argv[na] = ARGV[a + 2], mode
`)
	if cache {
		b.WriteString("  local run = runPlain\n  if k < shared then run = runCached end\n")
		b.WriteString("  local r = run(keys[k + 1], argv, na, now)\n")
	} else {
		b.WriteString("  local r = runPlain(keys[k + 1], argv, na, now)\n")
	}
	fmt.Fprintf(b, "  %s = %s\n", list("out[o + %d]", replyLen), list("r[%d]", replyLen))
	b.WriteString("  a = a + 2\nend\n")
	if cache {
		b.WriteString("flushAll()\n")
	}
	b.WriteString("return out\n")
}

// uncached are the algorithms whose commands lua/batch.lua's cache cannot
// answer (sliding_log's sorted set; held to the scripts by a test). The cache
// reads and writes a hot key once per call (BenchmarkDecideConcurrent keys=1).
var uncached = map[limiter.Algorithm]bool{limiter.SlidingLog: true}

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
