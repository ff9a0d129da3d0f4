package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/loadgen"
)

// resolveMode checks --mode and --estimate.
func (o *benchOptions) resolveMode() error {
	switch o.mode {
	case "decide", "lease":
		return nil
	case "reserve":
	default:
		return usagef("--mode: unknown mode %q (want decide, reserve or lease)", o.mode)
	}
	if err := o.limit.CheckCost(o.estimate); err != nil {
		return usagef("--estimate: %v", err)
	}
	return nil
}

// benchRounds is how many times each contender of a pair mode runs, in
// turns, so that a change of load on the machine falls on both alike.
const benchRounds = 6

// minBenchRound is the shortest turn: shorter ones measure mostly the
// ramp-up of the callers.
const minBenchRound = 100 * time.Millisecond

// pairContender is one side of a pair-mode run: what a caller does, and
// what it measured over its turns.
type pairContender struct {
	prefix string
	name   string // in the progress bar: "plain" or "pairs"
	op     loadgen.DecideFunc
	// acks, for a pair, counts the settles the store acknowledged: a pair
	// counts once its settle is acknowledged, not when its caller moves on.
	acks *settleAcks
	res  loadgen.Result
	// redisCPU and clientCPU are the CPU time Redis and this process spent
	// during the contender's turns.
	redisCPU, clientCPU time.Duration
}

// runBenchPairs measures plain decisions and, in turns with them for as
// long, reserve+commit pairs (--mode reserve) or lease acquire+release
// pairs (--mode lease) on other keys, in the same process and on the same
// store, and prints the pairs' report with both rates, their ratio and the
// CPU time each costs Redis and this process.
func runBenchPairs(ctx context.Context, o benchOptions, lim *limiter.Limiter, store limiter.Store, storeName string, stdout, stderr io.Writer) int {
	plain := &pairContender{prefix: "k", name: "plain", op: func(ctx context.Context, key string) (bool, error) {
		d, err := lim.AllowN(ctx, key, o.estimate)
		return d.Allowed, err
	}}
	pair, what, err := pairOp(o, lim, store, storeName)
	if err != nil {
		fmt.Fprintf(stderr, "rl-exporter bench: %v\n", err)
		return exitFailure
	}
	info, closeInfo, err := openRedisCPU(o)
	if err != nil {
		fmt.Fprintf(stderr, "rl-exporter bench: %v\n", err)
		return exitFailure
	}
	defer closeInfo()
	rounds := max(1, min(benchRounds, int(o.duration/minBenchRound)))
	fmt.Fprintf(stderr, "rl-exporter bench: %s, %s %s, %d callers, %d keys (%s): plain decisions and %s, in %d turns each, %s in all each\n",
		storeName, o.limit.Algorithm, o.limitText, o.concurrency, o.keys, keyDistribution(o.zipf), what, rounds, o.duration)
	if err := runInTurns(ctx, o, rounds, plain, pair, info, stderr); err != nil {
		fmt.Fprintf(stderr, "rl-exporter bench: %v\n", err)
		return exitFailure
	}
	rep := newBenchReport(storeName, o, pair.res)
	rep.Mode, rep.PlainDecisionsPerSecond = o.mode, plain.res.DecisionsPerSecond()
	if rep.PlainDecisionsPerSecond > 0 {
		rep.PairRatio = rep.DecisionsPerSecond / rep.PlainDecisionsPerSecond
	}
	if o.mode == "reserve" {
		rep.ReserveRatio = rep.PairRatio
	}
	rep.ClientCPUPerPlainSeconds, rep.ClientCPUPerPairSeconds = plain.cpuPerOp(plain.clientCPU), pair.cpuPerOp(pair.clientCPU)
	if info != nil {
		rep.RedisCPUPerPlainSeconds, rep.RedisCPUPerPairSeconds = plain.cpuPerOp(plain.redisCPU), pair.cpuPerOp(pair.redisCPU)
	}
	if o.json {
		return printBenchJSON(stdout, stderr, rep)
	}
	printPairReport(stdout, o, rep, what, info != nil)
	printBenchReport(stdout, rep, pair.res)
	return exitOK
}

// runInTurns runs a and b in turns, rounds each (b first every other
// round), for o.duration each in all, so that a change of load on the
// machine falls on both alike.
func runInTurns(ctx context.Context, o benchOptions, rounds int, a, b *pairContender, info *redisCPUReader, stderr io.Writer) error {
	turn := o.duration / time.Duration(rounds)
	bar := newBenchProgress(stderr, 2*o.duration, o.json)
	defer bar.finish()
	for i := range rounds {
		order := []*pairContender{a, b}
		if i%2 == 1 {
			order[0], order[1] = b, a
		}
		for j, c := range order {
			cfg := loadgen.Config{Duration: turn, Concurrency: o.concurrency, Keys: o.keys, Zipf: o.zipf, KeyPrefix: c.prefix,
				Progress: bar.stage(time.Duration(2*i+j)*turn, fmt.Sprintf("turn %d/%d, %s", 2*i+j+1, 2*rounds, c.name))}
			if err := c.runTurn(ctx, cfg, info); err != nil {
				return err
			}
		}
	}
	return nil
}

// pairOp is the pair --mode names, with a sentence for what it does.
func pairOp(o benchOptions, lim *limiter.Limiter, store limiter.Store, storeName string) (*pairContender, string, error) {
	if o.mode == "lease" {
		leases, err := limiter.NewLeases(limiter.LeasesConfig{
			Limit: limiter.LeaseLimit{Limit: o.limit.Quota()}, Store: store, Timeout: o.timeout})
		if err != nil {
			return nil, "", fmt.Errorf("--mode lease: %w", err)
		}
		acks := new(settleAcks)
		op := func(ctx context.Context, key string) (bool, error) {
			l, d, err := leases.Acquire(ctx, key)
			if err != nil || !d.Allowed {
				return false, err
			}
			acks.sent()
			leases.ReleaseAsync(ctx, l, func(_ int64, err error) { acks.answered(err) })
			return true, nil
		}
		return &pairContender{prefix: "l", name: "pairs", op: op, acks: acks}, "lease acquire+release pairs", nil
	}
	if !lim.Reserves() {
		return nil, "", fmt.Errorf("--mode reserve: the %s store cannot hold reservations under %s", storeName, o.limit.Algorithm)
	}
	acks := new(settleAcks)
	op := func(ctx context.Context, key string) (bool, error) {
		r, d, err := lim.Reserve(ctx, key, o.estimate)
		if err != nil || !d.Allowed {
			return false, err
		}
		acks.sent()
		lim.CommitAsync(ctx, r, rand.Int64N(2*o.estimate+1), func(_ limiter.Settlement, err error) { acks.answered(err) })
		return true, nil
	}
	return &pairContender{prefix: "r", name: "pairs", op: op, acks: acks}, fmt.Sprintf("reserve+commit pairs of %d", o.estimate), nil
}

// settleAcks counts the settles (commits, releases) a pair's caller sent
// without waiting, and what the store answered them. Safe for concurrent use.
type settleAcks struct {
	wg       sync.WaitGroup
	ok, fail atomic.Uint64
	first    atomic.Pointer[error]
}

// sent is called before a settle is sent; answered once it is answered.
func (a *settleAcks) sent() { a.wg.Add(1) }

func (a *settleAcks) answered(err error) {
	if err != nil {
		a.fail.Add(1)
		a.first.CompareAndSwap(nil, &err)
	} else {
		a.ok.Add(1)
	}
	a.wg.Done()
}

// settle waits for every settle of a turn whose callers are done to be
// answered, and makes res count the pairs settled: an admitted pair
// counts once its settle is acknowledged (a failed settle is an error),
// and the wait is part of the turn's time.
func (a *settleAcks) settle(res loadgen.Result, callersDone time.Time) loadgen.Result {
	a.wg.Wait()
	res.Elapsed += time.Since(callersDone)
	ok, fail := a.ok.Swap(0), a.fail.Swap(0)
	res.Allowed = ok
	res.Errors += fail
	res.Decisions = res.Allowed + res.Rejected + res.Errors
	if e := a.first.Swap(nil); e != nil && res.FirstError == nil {
		res.FirstError = *e
	}
	return res
}

// runTurn runs c for one turn and adds what it measured to c's totals.
func (c *pairContender) runTurn(ctx context.Context, cfg loadgen.Config, info *redisCPUReader) error {
	redisBefore, err := info.read(ctx)
	if err != nil {
		return err
	}
	clientBefore := processCPU()
	res, err := loadgen.Run(ctx, cfg, c.op)
	if err != nil {
		return err
	}
	if c.acks != nil {
		res = c.acks.settle(res, time.Now())
	}
	c.clientCPU += processCPU() - clientBefore
	redisAfter, err := info.read(ctx)
	if err != nil {
		return err
	}
	c.redisCPU += redisAfter - redisBefore
	c.res = mergeResults(c.res, res)
	return nil
}

// cpuPerOp is cpu per operation of c, in seconds.
func (c *pairContender) cpuPerOp(cpu time.Duration) float64 {
	if c.res.Decisions == 0 {
		return 0
	}
	return cpu.Seconds() / float64(c.res.Decisions)
}

// mergeResults adds b's counts, time and latencies to a's.
func mergeResults(a, b loadgen.Result) loadgen.Result {
	if a.Latency == nil {
		a.Latency = loadgen.NewHistogram()
	}
	a.Elapsed += b.Elapsed
	a.Decisions += b.Decisions
	a.Allowed += b.Allowed
	a.Rejected += b.Rejected
	a.Errors += b.Errors
	if a.FirstError == nil {
		a.FirstError = b.FirstError
	}
	if b.Latency != nil {
		a.Latency.Merge(b.Latency)
	}
	return a
}

// printPairReport prints the head of a pair mode's report: both rates,
// their ratio and the CPU time of one operation of each.
func printPairReport(w io.Writer, o benchOptions, rep benchReport, what string, redisCPU bool) {
	fmt.Fprintf(w, "plain        %.0f decisions/s (AllowN of %d)\n", rep.PlainDecisionsPerSecond, o.estimate)
	noun := "reserve+commit pairs/s"
	if o.mode == "lease" {
		noun = "lease acquire+release pairs/s"
	}
	fmt.Fprintf(w, "%-12s %.0f %s, %.2f× the plain decisions\n", o.mode, rep.DecisionsPerSecond, noun, rep.PairRatio)
	us := func(s float64) string { return strconv.FormatFloat(s*1e6, 'f', 1, 64) + "µs" }
	if redisCPU {
		fmt.Fprintf(w, "redis cpu    %s a pair, %s a plain decision (%.2f×)\n",
			us(rep.RedisCPUPerPairSeconds), us(rep.RedisCPUPerPlainSeconds), ratio(rep.RedisCPUPerPairSeconds, rep.RedisCPUPerPlainSeconds))
	}
	fmt.Fprintf(w, "client cpu   %s a pair, %s a plain decision (%.2f×)\n\n",
		us(rep.ClientCPUPerPairSeconds), us(rep.ClientCPUPerPlainSeconds), ratio(rep.ClientCPUPerPairSeconds, rep.ClientCPUPerPlainSeconds))
}

func ratio(a, b float64) float64 {
	if b <= 0 {
		return 0
	}
	return a / b
}

// redisCPUReader reads the CPU time Redis has spent (redisCPU), with a
// client of its own. A nil *redisCPUReader (the memory store) reads 0.
type redisCPUReader struct {
	client redis.UniversalClient
}

// openRedisCPU opens a client of its own for --store redis, so that its
// INFO calls take no connection from the store's pool; nil otherwise.
func openRedisCPU(o benchOptions) (*redisCPUReader, func(), error) {
	if o.store != "redis" {
		return nil, func() {}, nil
	}
	c, err := o.redisClient.NewClient()
	if err != nil {
		return nil, nil, err
	}
	return &redisCPUReader{client: c}, func() { c.Close() }, nil
}

func (r *redisCPUReader) read(ctx context.Context) (time.Duration, error) {
	if r == nil {
		return 0, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return redisCPU(ctx, r.client)
}
