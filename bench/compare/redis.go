package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	ulule "github.com/ulule/limiter/v3"
	ululeredis "github.com/ulule/limiter/v3/drivers/store/redis"

	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
)

// redisRate is the per-key limit of every Redis run: a million per minute,
// far above what one key receives here, so every decision is allowed.
const redisRate = 1_000_000

// privateRedis is a redis-server started for this run.
type privateRedis struct {
	cmd *exec.Cmd
	dir string
	url string
}

// startRedis starts redis-server on a free port of 127.0.0.1, persisting
// nothing, and waits until it answers.
func startRedis(ctx context.Context) (*privateRedis, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, errors.New("redis-server not found on PATH: install it (Debian: apt-get install redis-server) or pass --redis-url")
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "rl-exporter-compare-")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", dir, "--daemonize", "no", "--logfile", "")
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start redis-server: %w", err)
	}
	p := &privateRedis{cmd: cmd, dir: dir, url: fmt.Sprintf("redis://127.0.0.1:%d/0", port)}
	c := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port)})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := c.Ping(ctx).Err(); err == nil {
			return p, nil
		} else if time.Now().After(deadline) || ctx.Err() != nil {
			p.stop()
			return nil, fmt.Errorf("redis-server on port %d did not answer: %w", port, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (p *privateRedis) stop() {
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
	os.RemoveAll(p.dir)
}

// freePort asks the kernel for a free port, never the default Redis port.
func freePort() (int, error) {
	for range 10 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("find a free port: %w", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if port != 6379 {
			return port, nil
		}
	}
	return 0, errors.New("find a free port: no port other than 6379 offered")
}

// redisSet holds the Redis contenders and the clients to close.
type redisSet struct {
	contenders []contender
	clients    []interface{ Close() error }
}

func (s *redisSet) close() {
	for _, c := range s.clients {
		_ = c.Close()
	}
}

// newPeerClient is the client a user of redis_rate or ulule/limiter writes:
// go-redis defaults for the URL.
func newPeerClient(url string) (*redis.Client, error) {
	opt, err := redisstore.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("--redis-url: %w", err)
	}
	return redis.NewClient(opt), nil
}

func redisContenders(ctx context.Context, url string) (*redisSet, string, error) {
	s := &redisSet{}
	ok := false
	defer func() {
		if !ok {
			s.close()
		}
	}()

	rlGCRA, rlFixed, rlGCRAUnbatched, rlDesc, err := rlExporterRedis(ctx, url, s)
	if err != nil {
		return nil, "", err
	}

	rateClient, err := newPeerClient(url)
	if err != nil {
		return nil, "", err
	}
	s.clients = append(s.clients, rateClient)
	if err := rateClient.Ping(ctx).Err(); err != nil {
		return nil, "", fmt.Errorf("redis %s: %w", url, err)
	}
	rrl := redis_rate.NewLimiter(rateClient)
	rrLimit := redis_rate.Limit{Rate: redisRate, Burst: redisRate, Period: time.Minute}
	redisRateDecide := func(ctx context.Context, key string) (bool, error) {
		res, err := rrl.Allow(ctx, key, rrLimit)
		if err != nil {
			return false, err
		}
		return res.Allowed > 0, nil
	}

	ululeClient, err := newPeerClient(url)
	if err != nil {
		return nil, "", err
	}
	s.clients = append(s.clients, ululeClient)
	ululeStore, err := ululeredis.NewStore(ululeClient)
	if err != nil {
		return nil, "", fmt.Errorf("ulule/limiter redis store: %w", err)
	}
	ul := ulule.New(ululeStore, ulule.Rate{Period: time.Minute, Limit: redisRate})
	ululeDecide := func(ctx context.Context, key string) (bool, error) {
		c, err := ul.Get(ctx, key)
		if err != nil {
			return false, err
		}
		return !c.Reached, nil
	}

	cpu := func(ctx context.Context) (time.Duration, error) { return redisCPU(ctx, rateClient) }
	s.contenders = []contender{
		{store: "redis", name: "rl-exporter gcra", decide: rlGCRA, redisCPU: cpu},
		{store: "redis", name: "rl-exporter fixed_window", decide: rlFixed, redisCPU: cpu},
		{store: "redis", name: "rl-exporter gcra, batching off", decide: rlGCRAUnbatched, redisCPU: cpu},
		{store: "redis", name: "redis_rate v10 (GCRA)", baseline: true, decide: redisRateDecide, redisCPU: cpu},
		{store: "redis", name: "ulule/limiter v3 (fixed window)", decide: ululeDecide, redisCPU: cpu},
	}
	desc := redisInfo(ctx, rateClient) + "; " + rlDesc
	ok = true
	return s, desc, nil
}

// redisCPU is the CPU the server has used (used_cpu_sys + used_cpu_user
// of INFO cpu).
func redisCPU(ctx context.Context, c *redis.Client) (time.Duration, error) {
	info, err := c.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, fmt.Errorf("INFO cpu: %w", err)
	}
	var sec float64
	found := 0
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || (k != "used_cpu_sys" && k != "used_cpu_user") {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, fmt.Errorf("INFO cpu %s: %w", k, err)
		}
		sec += f
		found++
	}
	if found != 2 {
		return 0, errors.New("INFO cpu: no used_cpu_sys and used_cpu_user")
	}
	return time.Duration(sec * float64(time.Second)), nil
}
