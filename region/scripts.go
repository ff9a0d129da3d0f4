package region

import (
	"context"
	"embed"
	"fmt"
	"maps"
	"slices"

	"github.com/redis/go-redis/v9"

	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
)

//go:generate go test -run ^TestGeneratedScriptsAreCurrent$ -update .

// generatedFiles are the decision scripts as sent, one per algorithm of
// asyncAlgorithms, written by scripts_gen_test.go from the store's preamble,
// lua/slots.lua, the algorithm's decide (redisstore.DecideFunction, the
// store's own) and lua/run.lua.
//
//go:embed lua/generated/*.lua
var generatedFiles embed.FS

// mergeScript is the shipper's script, sent as written.
//
//go:embed lua/merge.lua
var mergeScript string

// asyncScripts are the multi-region decision scripts, one per algorithm of
// asyncAlgorithms, and the merge script of the shipper.
type asyncScripts struct {
	decide map[limiter.Algorithm]*redis.Script
	// merge runs through the store's one script runner (EVALSHA, then
	// EVAL on NOSCRIPT).
	merge *redisstore.Script
}

// load loads the decide scripts into c's Redis (SCRIPT LOAD, pipelined).
func (a *asyncScripts) load(ctx context.Context, c redis.UniversalClient) error {
	pipe := c.Pipeline()
	for _, alg := range slices.Sorted(maps.Keys(a.decide)) {
		a.decide[alg].Load(ctx, pipe)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("load scripts: %w", err)
	}
	return nil
}

// loadAsyncScripts reads each algorithm's decision script from
// lua/generated.
func loadAsyncScripts() (*asyncScripts, error) {
	out := &asyncScripts{decide: map[limiter.Algorithm]*redis.Script{}, merge: redisstore.NewScript(mergeScript)}
	for _, a := range asyncAlgorithms {
		src, err := generatedFiles.ReadFile("lua/generated/" + string(a) + ".lua")
		if err != nil {
			return nil, fmt.Errorf("script for %s: %w", a, err)
		}
		out.decide[a] = redis.NewScript(string(src))
	}
	return out, nil
}
