package app_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rl-exporter/rl-exporter/app"
	"github.com/rl-exporter/rl-exporter/config"
	"github.com/rl-exporter/rl-exporter/internal/redistest"
)

// evalCounter is a go-redis hook counting script calls (EVALSHA), alone or pipelined; a
// script's first call, refused NOSCRIPT, is sent again as EVAL, not counted.
type evalCounter struct{ n atomic.Int64 }

func (*evalCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *evalCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.count(cmd)
		return next(ctx, cmd)
	}
}

func (c *evalCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			c.count(cmd)
		}
		return next(ctx, cmds)
	}
}

func (c *evalCounter) count(cmd redis.Cmder) {
	if strings.ToLower(cmd.Name()) == "evalsha" {
		c.n.Add(1)
	}
}

// A class with shares decides most requests without Redis, refuses past the limit, and gives
// its unused units back when the process stops: Redis then counts exactly what was admitted.
func TestAClassWithSharesDecidesLocallyAndGivesBackOnShutdown(t *testing.T) {
	rdb := redistest.Single(t)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer up.Close()
	file := filepath.Join(t.TempDir(), "rl.yaml")
	yaml := fmt.Sprintf(`
server: {listen: "127.0.0.1:0", upstream: %q}
store: {type: redis, timeout: 1s, redis: {url: %q}}
classes:
  api:
    routes: ["GET /orders/{id}"]
    shares: {enabled: true, interval: 10s}
    limits:
      default: {algorithm: fixed_window, rate: 1000, period: 1h, align_windows: true}
`, up.URL, rdb.URL())
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := (&config.Sources{File: file}).Load()
	if err != nil {
		t.Fatal(err)
	}
	evals := &evalCounter{}
	built, err := app.Build(cfg, app.Deps{InstrumentRedis: func(c redis.UniversalClient) error {
		c.AddHook(evals)
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- built.Serve(ctx) }()
	select {
	case <-built.Ready():
	case err := <-done:
		t.Fatalf("serve ended before it was ready: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("serve not ready within 10s")
	}
	var before int64
	statuses := map[int]int{}
	for i := range 30 {
		if i == 10 { // the first chunks are used up
			before = evals.n.Load()
		}
		resp, err := http.Get("http://" + built.Addr("main") + "/orders/42")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		statuses[resp.StatusCode]++
	}
	if statuses[http.StatusOK] != 30 {
		t.Fatalf("statuses %v, want 30 × 200", statuses)
	}
	// 3 plain decisions, then chunks of 8 and 24 units (at most a tenth of the quota):
	// requests 11 to 30 take the chunk of 24 and settle the used-up one of 8, two calls for
	// 20 requests.
	if n := evals.n.Load() - before; n > 2 {
		t.Errorf("requests 11 to 30 made %d script calls to Redis, want 2", n)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v", err)
	}
	keys, err := rdb.Do("KEYS", "*fixed_window*")
	if err != nil {
		t.Fatal(err)
	}
	var counted []string
	for _, k := range keys.([]any) {
		if k := k.(string); !strings.HasSuffix(k, ":resv") {
			n, err := rdb.Do("HGET", k, "n")
			if err != nil {
				t.Fatal(err)
			}
			counted = append(counted, fmt.Sprint(n))
		}
	}
	if fmt.Sprint(counted) != "[30]" {
		t.Errorf("after shutdown Redis counts %v, want [30]: the unused units given back", counted)
	}
}
