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

// algScripts are an algorithm's single-decision and batch scripts and the
// shape of one decision: how many keys and arguments it takes.
type algScripts struct {
	alg    limiter.Algorithm
	single script
	batch  script
	nkeys  int
	nargs  int
}

// algorithm indexes, in limiter.AllAlgorithms order; algCount means unknown.
const algCount = 6

func algIndex(a limiter.Algorithm) int {
	switch a {
	case limiter.FixedWindow:
		return 0
	case limiter.SlidingLog:
		return 1
	case limiter.SlidingWindow:
		return 2
	case limiter.TokenBucket:
		return 3
	case limiter.LeakyBucket:
		return 4
	case limiter.GCRA:
		return 5
	}
	return algCount
}

// shape is the number of keys and arguments of one decision of a; the
// last two arguments are always the cost and the mode.
func shape(a limiter.Algorithm) (nkeys, nargs int) {
	switch a {
	case limiter.SlidingLog:
		return 2, 4
	case limiter.LeakyBucket:
		return 1, 6
	}
	return 1, 5
}

// scriptSources assembles algorithm a's two scripts from lua/: the shared
// preamble, lua/<a>.lua as the body of the function
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
func scriptSources(a limiter.Algorithm, clock string) (single, batch string, err error) {
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
	nk, na := shape(a)
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

// loadScripts builds every algorithm's scripts from lua/*.lua.
func loadScripts() ([algCount]algScripts, error) {
	var all [algCount]algScripts
	for _, a := range limiter.AllAlgorithms() {
		single, batch, err := scriptSources(a, redisClock)
		if err != nil {
			return all, err
		}
		nk, na := shape(a)
		all[algIndex(a)] = algScripts{alg: a, single: newScript(single), batch: newScript(batch), nkeys: nk, nargs: na}
	}
	return all, nil
}
