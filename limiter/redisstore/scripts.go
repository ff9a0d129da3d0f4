package redisstore

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// scriptClockLine is the one line of every script that reads Redis's clock.
// The batch scripts move it out of the decision so that it runs once per
// call.
const scriptClockLine = "local clock = redis.call('TIME')"

// redisClock is the expression the batch scripts read the clock with.
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

// algorithm indexes, in limiter.Algorithms order; algCount means unknown.
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

// shape is the number of keys and arguments of one decision of a.
func shape(a limiter.Algorithm) (nkeys, nargs int) {
	switch a {
	case limiter.SlidingLog:
		return 2, 3
	case limiter.LeakyBucket:
		return 1, 5
	}
	return 1, 4
}

// batchSource turns an algorithm's single-decision script into one that
// makes #KEYS/nkeys decisions in one call, in order, each exactly as the
// single script would at the same instant: the single script becomes the
// body of a function whose KEYS and ARGV are the decision's own, and the
// clock is read once (with clock, a Lua expression) for the whole call. A
// script runs atomically, so each decision still does. The reply is the
// decisions' five integers one after another.
func batchSource(single string, nkeys, nargs int, clock string) (string, error) {
	if n := strings.Count(single, scriptClockLine); n != 1 {
		return "", fmt.Errorf("script reads the clock %d times, want exactly once via %q", n, scriptClockLine)
	}
	body := strings.Replace(single, scriptClockLine, "", 1)
	var b strings.Builder
	b.WriteString("-- Code generated from the single-decision script by rl-exporter. DO NOT EDIT.\n")
	b.WriteString("local function decide(KEYS, ARGV, clock)\n")
	b.WriteString(body)
	b.WriteString("\nend\n")
	b.WriteString("local clock = " + clock + "\n")
	b.WriteString("local nk, na = " + strconv.Itoa(nkeys) + ", " + strconv.Itoa(nargs) + "\n")
	b.WriteString(`local keys, argv, out = {}, {}, {}
for i = 0, #KEYS / nk - 1 do
  for j = 1, nk do keys[j] = KEYS[i * nk + j] end
  for j = 1, na do argv[j] = ARGV[i * na + j] end
  local r = decide(keys, argv, clock)
  local o = i * 5
  for j = 1, 5 do out[o + j] = r[j] end
end
return out
`)
	return b.String(), nil
}

// loadScripts builds every algorithm's scripts from lua/*.lua.
func loadScripts() ([algCount]algScripts, error) {
	var all [algCount]algScripts
	for _, a := range limiter.Algorithms {
		src, err := luaFiles.ReadFile("lua/" + string(a) + ".lua")
		if err != nil {
			return all, fmt.Errorf("script for %s: %w", a, err)
		}
		nk, na := shape(a)
		bsrc, err := batchSource(string(src), nk, na, redisClock)
		if err != nil {
			return all, fmt.Errorf("script for %s: %w", a, err)
		}
		all[algIndex(a)] = algScripts{alg: a, single: newScript(string(src)), batch: newScript(bsrc), nkeys: nk, nargs: na}
	}
	return all, nil
}
