package server_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/rl-exporter/rl-exporter/app"
	"github.com/rl-exporter/rl-exporter/config"
	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/limiter"
)

// scriptCalls is the number of script calls (EVALSHA and EVAL) Redis has
// served since its statistics were last reset.
func scriptCalls(t *testing.T, rdb *redis.Client) int {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(info, "\n") {
		for _, cmd := range []string{"cmdstat_evalsha:calls=", "cmdstat_eval:calls="} {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(line), cmd); ok {
				v, err := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
				if err != nil {
					t.Fatalf("commandstats line %q: %v", line, err)
				}
				n += v
			}
		}
	}
	return n
}

func TestServeBatchesRedisDecisionsUnlessTheConfigTurnsItOff(t *testing.T) {
	rdb := redistest.Single(t)
	admin := redis.NewClient(&redis.Options{Addr: rdb.Addr()})
	defer admin.Close()
	ctx := context.Background()

	const callers, each = 32, 20
	// decideConcurrently makes callers × each decisions on the store the
	// config opens, from callers goroutines at once, and returns how many
	// script calls Redis served for them.
	decideConcurrently := func(t *testing.T, prefix, batch string) int {
		t.Helper()
		yaml := fmt.Sprintf("store: {type: redis, redis: {url: %q, prefix: %s%s}}\n", rdb.URL(), prefix, batch)
		cfg, err := config.Parse(filepath.Join(t.TempDir(), "rl.yaml"), []byte(yaml))
		if err != nil {
			t.Fatal(err)
		}
		opened, err := app.OpenStore(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer opened.Close()
		lim, err := limiter.New(limiter.Config{Limit: limiter.PerMinute(limiter.GCRA, 1_000_000), Store: opened.Store, Timeout: -1})
		if err != nil {
			t.Fatal(err)
		}
		run := func() {
			var wg sync.WaitGroup
			start := make(chan struct{})
			for c := 0; c < callers; c++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					for i := 0; i < each; i++ {
						if _, err := lim.Allow(ctx, "client-"+strconv.Itoa(c)); err != nil {
							t.Error(err)
							return
						}
					}
				}()
			}
			close(start)
			wg.Wait()
		}
		run() // loads the scripts (a first EVALSHA fails with NOSCRIPT)
		if err := admin.ConfigResetStat(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		run()
		return scriptCalls(t, admin)
	}

	const decisions = callers * each
	if calls := decideConcurrently(t, "off", ", batch: {disabled: true}"); calls != decisions {
		t.Errorf("with store.redis.batch.disabled: %d script calls for %d decisions, want one each", calls, decisions)
	}
	if calls := decideConcurrently(t, "on", ""); calls >= decisions {
		t.Errorf("with batching on by default: %d script calls for %d concurrent decisions, want fewer", calls, decisions)
	} else {
		t.Logf("batching on: %d script calls for %d decisions", calls, decisions)
	}
	if calls := decideConcurrently(t, "one", ", batch: {max_size: 1}"); calls != decisions {
		t.Errorf("with store.redis.batch.max_size 1: %d script calls for %d decisions, want one each", calls, decisions)
	}
}
