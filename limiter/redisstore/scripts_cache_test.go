package redisstore

import (
	"regexp"
	"strings"
	"testing"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// cachedCommands are the commands lua/batch.lua's cache answers.
var cachedCommands = map[string]bool{"GET": true, "SET": true, "HMGET": true, "HSET": true, "PEXPIRE": true}

var luaCall = regexp.MustCompile(`redis\.call\('([A-Z]+)'`)

func TestTheBatchCacheAnswersEveryCommandOfTheScriptsThatUseIt(t *testing.T) {
	for _, spec := range limiter.AlgorithmSpecs() {
		a := spec.Algorithm()
		decide, err := DecideFunction(a)
		if err != nil {
			t.Fatal(err)
		}
		calls := luaCall.FindAllStringSubmatch(decide, -1)
		answered := len(calls) > 0 && len(calls) == strings.Count(decide, "redis.call(")
		for _, c := range calls {
			answered = answered && cachedCommands[c[1]]
		}
		if answered == uncached[a] {
			t.Errorf("%s: the cache answers all its commands: %v; listed in uncached: %v", a, answered, uncached[a])
		}
	}
}
