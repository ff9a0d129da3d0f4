package redisstore

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/rl-exporter/rl-exporter/limiter"
)

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
//   - batch: makes #KEYS/nkeys decisions in one call, in order, each exactly
//     as the single script would at the same instant (KEYS and ARGV hold
//     the decisions' own one after another), and returns their five
//     integers one after another.
//
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
	preamble, err := read("preamble")
	if err != nil {
		return "", "", err
	}
	body, err := read(string(a))
	if err != nil {
		return "", "", err
	}
	run, err := read("run")
	if err != nil {
		return "", "", err
	}
	if strings.Contains(body, redisClock) {
		return "", "", fmt.Errorf("script for %s reads the clock itself; decide is given now", a)
	}
	nk, na := spec.NumKeys(), spec.NumParams()+2
	var common strings.Builder
	common.WriteString("-- Code generated from lua/preamble.lua, lua/" + string(a) + ".lua and lua/run.lua by rl-exporter. DO NOT EDIT.\n")
	common.WriteString(preamble)
	common.WriteString("local function decide(KEYS, ARGV, now, cost, peek)\n")
	common.WriteString(body)
	common.WriteString("end\n")
	common.WriteString(run)
	common.WriteString("local clock = " + clock + "\n")
	common.WriteString("local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])\n")
	single = common.String() + "return run(KEYS, ARGV, " + strconv.Itoa(na) + ", now)\n"
	batch = common.String() + "local nk, na = " + strconv.Itoa(nk) + ", " + strconv.Itoa(na) + "\n" + `local keys, argv, out = {}, {}, {}
for i = 0, #KEYS / nk - 1 do
  for j = 1, nk do keys[j] = KEYS[i * nk + j] end
  for j = 1, na do argv[j] = ARGV[i * na + j] end
  local r = run(keys, argv, na, now)
  local o = i * 5
  for j = 1, 5 do out[o + j] = r[j] end
end
return out
`
	return single, batch, nil
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
