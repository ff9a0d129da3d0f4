package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/shares"
)

// resolveShares checks --shares and --shares-interval.
func (o *benchOptions) resolveShares() error {
	if !o.shares {
		return nil
	}
	switch {
	case o.store != "redis":
		return usagef("--shares: shares are reserved from Redis: give --store redis")
	case o.mode != "decide" || o.limits != 1:
		return usagef("--shares: measures plain decisions (--mode decide, --limits 1)")
	case !shares.Supports(o.limit):
		return usagef("--shares: %v", shares.ErrUnsupported)
	case o.sharesInterval < time.Millisecond:
		return usagef("--shares-interval: must be at least 1ms, got %s", o.sharesInterval)
	}
	return nil
}

// runBenchShares measures plain decisions on Redis and, in turns with them for as long,
// decisions from local shares of the same limit on other keys (limiter/shares), in the same
// process on the same Redis, and prints the shares' report with both rates, their ratio and
// the CPU time each decision costs Redis and this process.
func runBenchShares(ctx context.Context, o benchOptions, lim *limiter.Limiter, store limiter.Store, storeName string, stdout, stderr io.Writer) int {
	rs, ok := store.(limiter.Reserver)
	if !ok {
		fmt.Fprintf(stderr, "rl-exporter bench: --shares: the %s store holds no reservations\n", storeName)
		return exitFailure
	}
	st, err := shares.New(shares.Config{Store: rs, Interval: o.sharesInterval})
	if err != nil {
		fmt.Fprintf(stderr, "rl-exporter bench: %v\n", err)
		return exitFailure
	}
	local, err := limiter.New(limiter.Config{Limit: o.limit, Store: st, Timeout: o.timeout})
	if err != nil {
		fmt.Fprintf(stderr, "rl-exporter bench: %v\n", err)
		return exitFailure
	}
	allow := func(l *limiter.Limiter) func(context.Context, string) (bool, error) {
		return func(ctx context.Context, key string) (bool, error) {
			d, err := l.Allow(ctx, key)
			return d.Allowed, err
		}
	}
	plain := &pairContender{prefix: "k", name: "plain", op: allow(lim)}
	shared := &pairContender{prefix: "s", name: "shares", op: allow(local)}
	info, closeInfo, err := openRedisCPU(o)
	if err != nil {
		fmt.Fprintf(stderr, "rl-exporter bench: %v\n", err)
		return exitFailure
	}
	defer closeInfo()
	rounds := max(1, min(benchRounds, int(o.duration/minBenchRound)))
	fmt.Fprintf(stderr, "rl-exporter bench: %s, %s %s, %d callers, %d keys (%s): plain decisions and decisions from shares (interval %s), in %d turns each, %s in all each\n",
		storeName, o.limit.Algorithm, o.limitText, o.concurrency, o.keys, keyDistribution(o.zipf), o.sharesInterval, rounds, o.duration)
	runErr := runInTurns(ctx, o, rounds, plain, shared, info, stderr)
	closeCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := st.Close(closeCtx); err != nil {
		// Chunks not given back expire charged: fewer admissions, no error of a decision.
		fmt.Fprintf(stderr, "rl-exporter bench: warning: %v\n", err)
	}
	if runErr != nil {
		fmt.Fprintf(stderr, "rl-exporter bench: %v\n", runErr)
		return exitFailure
	}
	rep := newBenchReport(storeName, o, shared.res)
	rep.Mode, rep.PlainDecisionsPerSecond = "shares", plain.res.DecisionsPerSecond()
	rep.SharesRatio = ratio(rep.DecisionsPerSecond, rep.PlainDecisionsPerSecond)
	rep.SharesIntervalSeconds = o.sharesInterval.Seconds()
	stats := st.Stats()
	rep.ShareReservations, rep.ShareGiveBacks = stats.Reserves, stats.Settles
	rep.ClientCPUPerPlainSeconds, rep.ClientCPUPerSharesSeconds = plain.cpuPerOp(plain.clientCPU), shared.cpuPerOp(shared.clientCPU)
	rep.RedisCPUPerPlainSeconds, rep.RedisCPUPerSharesSeconds = plain.cpuPerOp(plain.redisCPU), shared.cpuPerOp(shared.redisCPU)
	if o.json {
		return printBenchJSON(stdout, stderr, rep)
	}
	printSharesReport(stdout, rep)
	printBenchReport(stdout, rep, shared.res)
	return exitOK
}

// printSharesReport prints the head of --shares's report: both rates, their ratio and the
// CPU time of one decision of each.
func printSharesReport(w io.Writer, rep benchReport) {
	fmt.Fprintf(w, "plain        %.0f decisions/s (a Redis call each)\n", rep.PlainDecisionsPerSecond)
	fmt.Fprintf(w, "shares       %.0f decisions/s, %.2f× the plain decisions (interval %s; %d chunks asked of Redis, %d given back)\n",
		rep.DecisionsPerSecond, rep.SharesRatio, time.Duration(rep.SharesIntervalSeconds*float64(time.Second)), rep.ShareReservations, rep.ShareGiveBacks)
	us := func(s float64) string { return strconv.FormatFloat(s*1e6, 'f', 2, 64) + "µs" }
	fmt.Fprintf(w, "redis cpu    %s a decision from shares, %s a plain decision (%.2f×)\n",
		us(rep.RedisCPUPerSharesSeconds), us(rep.RedisCPUPerPlainSeconds), ratio(rep.RedisCPUPerSharesSeconds, rep.RedisCPUPerPlainSeconds))
	fmt.Fprintf(w, "client cpu   %s a decision from shares, %s a plain decision (%.2f×)\n\n",
		us(rep.ClientCPUPerSharesSeconds), us(rep.ClientCPUPerPlainSeconds), ratio(rep.ClientCPUPerSharesSeconds, rep.ClientCPUPerPlainSeconds))
}
