package region

import (
	"context"
	"embed"
	"fmt"
	"maps"
	"slices"
	"strings"

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

// loadAsyncScripts assembles each algorithm's script from the decision
// scripts' shared preamble (redisstore.Preamble), lua/slots.lua,
// lua/<algorithm>.lua as the body of decide(KEYS, ARGV, now, cost, peek),
// lua/run.lua and a main part that reads Redis's TIME once.
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
		body, err := read(string(a))
		if err != nil {
			return nil, err
		}
		var b strings.Builder
		b.WriteString("-- Code generated from limiter/redisstore/lua/preamble.lua, region/lua/slots.lua, " + string(a) + ".lua and run.lua by rl-exporter. DO NOT EDIT.\n")
		b.WriteString(redisstore.Preamble())
		b.WriteString(slots)
		b.WriteString("local function decide(KEYS, ARGV, now, cost, peek)\n")
		b.WriteString(body)
		b.WriteString("end\n")
		b.WriteString(run)
		b.WriteString("local clock = redis.call('TIME')\n")
		b.WriteString("local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])\n")
		b.WriteString("return run(KEYS, ARGV, now)\n")
		out.decide[a] = redis.NewScript(b.String())
	}
	return out, nil
}
