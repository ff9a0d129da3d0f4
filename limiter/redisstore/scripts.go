package redisstore

import (
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
	"fmt"
	"regexp"
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

// redisClock is the expression the scripts read the clock with: Redis's
// TIME, {seconds, microseconds}.
const redisClock = "redis.call('TIME')"

// script is one Lua script: its source and SHA1, for EVALSHA with an EVAL
// fallback on NOSCRIPT.
type script struct {
	src string
	sha string
	// srcArg and shaArg are src and sha boxed once, so that building a
	// command does not allocate.
	srcArg, shaArg any
}

func newScript(src string) script {
	h := sha1.Sum([]byte(src))
	sha := hex.EncodeToString(h[:])
	return script{src: src, sha: sha, srcArg: src, shaArg: sha}
}

// algScripts are an algorithm's row of the limiter's table and its
// single-decision and batch scripts.
type algScripts struct {
	spec   *limiter.AlgorithmSpec
	single script
	batch  script
	// keySuffixes is spec.KeySuffixes(), copied once: what each of a
	// decision's keys appends to its base key.
	keySuffixes []string
	// nkeys and nargs are the number of keys and arguments of one
	// decision: the spec's keys, and its parameters then the cost and the
	// mode.
	nkeys, nargs int
}

// maxKeys and maxArgs bound the keys and arguments of one decision, so
// that a request holds them in arrays; loadScripts refuses an algorithm
// that needs more.
const (
	maxKeys = 2
	maxArgs = 6
)

// scriptSources assembles the two scripts of spec's algorithm a from
// lua/: the shared preamble, lua/<a>.lua as the body of the function
// decide(KEYS, ARGV, now, cost, peek), lua/run.lua (one decision in the
// mode its arguments name, see limiter.Mode), and a main part that reads
// the clock once with clock (a Lua expression giving {seconds,
// microseconds}: redisClock, or arguments in tests) and
//
//   - single: makes the one decision of KEYS and ARGV;
//   - batch: makes many decisions in one call, in order, each exactly as
//     the single script would at the same instant, and returns their five
//     integers one after another. KEYS holds each distinct key once and
//     ARGV each distinct set of limit parameters once, then each
//     decision's indexes into them, mode and cost (see encoder and
//     writeBatchLoop).
//
// The batch script also holds lua/batch.lua, and decide and run twice:
// once as in the single script, for the decisions whose keys come once in
// the batch, and, when the algorithm's decide sends only the commands that
// lua/batch.lua's cache answers (cacheable), once with that cache standing
// in for redis, for the decisions that share a key with others: their key
// is read once and written once per call instead of once per decision.
// A script runs atomically, so each decision of a batch still does.
func scriptSources(spec *limiter.AlgorithmSpec, clock string) (single, batch string, err error) {
	a := spec.Algorithm()
	read := func(name string) (string, error) {
		b, err := luaFiles.ReadFile("lua/" + name + ".lua")
		if err != nil {
			return "", fmt.Errorf("script for %s: %w", a, err)
		}
		return string(b), nil
	}
	body, err := read(string(a))
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
	if strings.Contains(body, redisClock) {
		return "", "", fmt.Errorf("script for %s reads the clock itself; decide is given now", a)
	}
	nk, na := spec.NumKeys(), spec.NumParams()+2
	header := "-- Code generated from lua/preamble.lua, lua/" + string(a) + ".lua and lua/run.lua by rl-exporter. DO NOT EDIT.\n"
	decide := "local function decide(KEYS, ARGV, now, cost, peek)\n" + body + "end\n" + run
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
	cache := cacheable(body)
	if cache {
		b.WriteString("do\nlocal redis = cached\n")
		b.WriteString(decide)
		b.WriteString("runCached = run\nend\n")
	}
	writeBatchLoop(&b, nk, spec.NumParams(), cache)
	return single, b.String(), nil
}

// writeBatchLoop writes the batch script's main loop, which reads the
// call sender.buildCommands writes (see encoder): KEYS holds each
// distinct key once (nk keys each), ARGV the number of decisions n, the
// number of parameter sets, the number of shared keys (those first in
// KEYS), each set's np parameters, then each decision's code and cost.
// Each decision runs with its key's and its set's tables (the cost and
// mode written into the set's table, na = np + 2 arguments), with the
// cache (runCached) when its key is shared and cache is set; its five
// integers are appended to the reply, and the cache's pending writes sent
// at the end. The copies are unrolled for nk keys and np parameters.
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

// cachedCommands are the commands lua/batch.lua's cache answers.
var cachedCommands = map[string]bool{"GET": true, "SET": true, "HMGET": true, "HSET": true, "PEXPIRE": true}

// luaCall matches a command an algorithm's decide sends.
var luaCall = regexp.MustCompile(`redis\.call\('([A-Z]+)'`)

// cacheable reports whether every command the decide body sends is one
// lua/batch.lua's cache answers (those it does not answer would still be
// right, only slower: each writes what is pending for its key first).
func cacheable(body string) bool {
	calls := luaCall.FindAllStringSubmatch(body, -1)
	if len(calls) == 0 || len(calls) != strings.Count(body, "redis.call(") {
		return false
	}
	for _, c := range calls {
		if !cachedCommands[c[1]] {
			return false
		}
	}
	return true
}

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

// argsInto appends to dst the ARGV of spec's script for a decision on key:
// the algorithm's parameters (limiter.AlgorithmSpec.AppendParams), then
// the cost and the mode (0 consume, 1 peek, 2 at most: the values of
// limiter.Mode). go-redis writes integers with strconv: no fmt on the
// decision path.
func argsInto(dst []int64, spec *limiter.AlgorithmSpec, key string, lim limiter.Limit, cost int64, mode limiter.Mode) []int64 {
	return append(spec.AppendParams(dst, key, lim), cost, int64(mode))
}
