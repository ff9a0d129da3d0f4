package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
)

// benchRedis is what a run on Redis measures besides the decisions: the
// client and store it decides through.
type benchRedis struct {
	client redis.UniversalClient
	store  *redisstore.Store
}

// benchCost is what a run costs in CPU: Redis's own (INFO cpu, summed
// over a Cluster's masters; other clients of that Redis count too) and
// this process's, read before and after. One goroutine uses it.
type benchCost struct {
	rb         *benchRedis
	redis, own time.Duration
	redisErr   error
}

// startCost reads the CPU used so far.
func startCost(ctx context.Context, rb *benchRedis) *benchCost {
	c := &benchCost{rb: rb, own: processCPU()}
	c.redis, c.redisErr = redisCPU(ctx, rb.client)
	return c
}

// perDecision returns Redis's and this process's CPU since startCost per
// decision of n, in µs (Redis's 0 when INFO could not be read).
func (c *benchCost) perDecision(ctx context.Context, n uint64) (redisUS, ownUS float64) {
	if n == 0 {
		return 0, 0
	}
	ownUS = float64((processCPU() - c.own).Microseconds()) / float64(n)
	r, err := redisCPU(ctx, c.rb.client)
	if err != nil || c.redisErr != nil {
		return 0, ownUS
	}
	return float64((r - c.redis).Microseconds()) / float64(n), ownUS
}

// redisCPU is the CPU Redis has used (used_cpu_sys + used_cpu_user), on
// a Cluster summed over its masters.
func redisCPU(ctx context.Context, client redis.UniversalClient) (time.Duration, error) {
	cc, ok := client.(*redis.ClusterClient)
	if !ok {
		return nodeCPU(ctx, client)
	}
	var mu sync.Mutex
	var sum time.Duration
	err := cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		d, err := nodeCPU(ctx, node)
		mu.Lock()
		sum += d
		mu.Unlock()
		return err
	})
	return sum, err
}

// nodeCPU is one Redis node's CPU from INFO cpu.
func nodeCPU(ctx context.Context, c redis.Cmdable) (time.Duration, error) {
	info, err := c.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, fmt.Errorf("INFO cpu: %w", err)
	}
	return parseInfoCPU(info)
}

// parseInfoCPU adds used_cpu_sys and used_cpu_user of an INFO cpu reply.
func parseInfoCPU(text string) (time.Duration, error) {
	var total float64
	found := 0
	for _, line := range strings.Split(text, "\n") {
		name, value, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || (name != "used_cpu_sys" && name != "used_cpu_user") {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return 0, fmt.Errorf("INFO cpu %s: %w", name, err)
		}
		total += v
		found++
	}
	if found != 2 {
		return 0, fmt.Errorf("INFO cpu: no used_cpu_sys and used_cpu_user in %q", text)
	}
	return time.Duration(total * float64(time.Second)), nil
}

// ceiling is what Redis alone decides: the batch script fed full batches
// by one connection, with no limiter code around it.
type ceiling struct {
	batch          int
	decisions      uint64
	elapsed        time.Duration
	redisCPUPerDec float64 // µs
}

// Shape of the ceiling run: full batches of the store's largest size,
// ceilingDepth of them in each pipeline on one connection, on at most
// ceilingCalls prepared calls (their keys in turn), for at most
// ceilingMax.
const (
	ceilingDepth   = 4
	ceilingCalls   = 64
	ceilingMax     = 3 * time.Second
	ceilingTimeout = 30 * time.Second
)

// runCeiling measures the ceiling for lim over nkeys keys of their own
// (prefix ceiling:, apart from the run's) for up to d, on a single Redis.
func runCeiling(ctx context.Context, rb *benchRedis, lim limiter.Limit, nkeys int, d time.Duration) (ceiling, error) {
	c := ceiling{batch: redisstore.DefaultBatchMaxSize}
	client, ok := rb.client.(*redis.Client)
	if fc, sentinel := rb.client.(*redisstore.FailoverClient); sentinel {
		client, ok = fc.Client, true
	}
	if !ok {
		return c, fmt.Errorf("the ceiling is measured on a single Redis, not a Cluster")
	}
	ncalls := min(max(nkeys/c.batch, 1), ceilingCalls)
	calls := make([]redisstore.BatchCall, ncalls)
	for i := range calls {
		keys := make([]string, c.batch)
		for j := range keys {
			keys[j] = "ceiling:" + strconv.Itoa((i*c.batch+j)%nkeys)
		}
		var err error
		if calls[i], err = rb.store.BatchCall(lim, keys); err != nil {
			return c, err
		}
	}
	// Its own connection, with timeouts a busy machine does not reach:
	// the ceiling is a cost, not a latency.
	opts := *client.Options()
	opts.PoolSize, opts.ReadTimeout, opts.WriteTimeout = 1, ceilingTimeout, ceilingTimeout
	own := redis.NewClient(&opts)
	defer own.Close()
	conn := own.Conn()
	defer conn.Close()
	if err := conn.ScriptLoad(ctx, calls[0].Src).Err(); err != nil {
		return c, fmt.Errorf("ceiling: SCRIPT LOAD: %w", err)
	}
	cpu0, err := nodeCPU(ctx, conn)
	if err != nil {
		return c, err
	}
	start := time.Now()
	for i := 0; time.Since(start) < min(d, ceilingMax); {
		pipe := conn.Pipeline()
		for j := 0; j < ceilingDepth; j++ {
			pipe.Do(ctx, calls[i%ncalls].Args...)
			i++
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return c, fmt.Errorf("ceiling: %w", err)
		}
		c.decisions += uint64(ceilingDepth * c.batch)
	}
	c.elapsed = time.Since(start)
	cpu1, err := nodeCPU(ctx, conn)
	if err != nil {
		return c, err
	}
	c.redisCPUPerDec = float64((cpu1 - cpu0).Microseconds()) / float64(c.decisions)
	return c, nil
}

// perSecond is the ceiling's decisions per second.
func (c ceiling) perSecond() float64 {
	if c.elapsed <= 0 {
		return 0
	}
	return float64(c.decisions) / c.elapsed.Seconds()
}
