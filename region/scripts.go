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

//go:embed lua/*.lua
var luaFiles embed.FS

// asyncScripts are the multi-region decision scripts, one per algorithm of
// asyncAlgorithms, and the merge script of the shipper.
type asyncScripts struct {
	decide map[limiter.Algorithm]*redis.Script
	merge  *redis.Script
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

// loadAsyncScripts assembles each algorithm's script: the decision
// scripts' preamble (redisstore.Preamble), lua/slots.lua (the per-region
// slots the algorithm's decide reads and writes once it sets regions), the
// algorithm's decide (redisstore.DecideFunction, the store's own) and
// lua/run.lua (the mode and the main part).
func loadAsyncScripts() (*asyncScripts, error) {
	read := func(name string) (string, error) {
		b, err := luaFiles.ReadFile("lua/" + name + ".lua")
		if err != nil {
			return "", fmt.Errorf("script %s: %w", name, err)
		}
		return string(b), nil
	}
	slots, err := read("slots")
	if err != nil {
		return nil, err
	}
	run, err := read("run")
	if err != nil {
		return nil, err
	}
	merge, err := read("merge")
	if err != nil {
		return nil, err
	}
	out := &asyncScripts{decide: map[limiter.Algorithm]*redis.Script{}, merge: redis.NewScript(merge)}
	for _, a := range asyncAlgorithms {
		decide, err := redisstore.DecideFunction(a)
		if err != nil {
			return nil, err
		}
		out.decide[a] = redis.NewScript(redisstore.Preamble() + slots + decide + run)
	}
	return out, nil
}
