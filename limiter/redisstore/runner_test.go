package redisstore_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
)

func TestRunPipelinedSendsThePipelineAgainWithEvalAfterNoscript(t *testing.T) {
	srv := redistest.Single(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	sc := redisstore.NewScript("return redis.call('INCRBY', KEYS[1], ARGV[1])")
	calls := []redisstore.ScriptCall{{Keys: []string{"pipelined:a"}, Args: []any{2}}, {Keys: []string{"pipelined:b"}, Args: []any{3}}}
	for round, want := range []int64{1, 2} {
		if _, err := srv.Do("SCRIPT", "FLUSH"); err != nil {
			t.Fatal(err)
		}
		cmds, err := sc.RunPipelined(ctx, c, func(p redis.Pipeliner) { p.Set(ctx, "pipelined:before", round, 0) }, calls)
		if err != nil {
			t.Fatalf("round %d after SCRIPT FLUSH: %v", round, err)
		}
		for i, cmd := range cmds {
			// Each call ran once: the EVALSHA that met NOSCRIPT wrote nothing.
			by := int64(calls[i].Args[0].(int))
			if got, err := cmd.Int64(); err != nil || got != want*by {
				t.Fatalf("round %d, call %d: %d, %v; want %d", round, i, got, err, want*by)
			}
		}
		if got, err := c.Get(ctx, "pipelined:before").Int(); err != nil || got != round {
			t.Fatalf("round %d: the command before the calls left %d, %v", round, got, err)
		}
	}
	// Loaded now: EVALSHA alone.
	if _, err := sc.RunPipelined(ctx, c, nil, calls); err != nil {
		t.Fatalf("with the script loaded: %v", err)
	}
}
