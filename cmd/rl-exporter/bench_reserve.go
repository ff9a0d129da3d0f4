package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"

	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/loadgen"
)

// resolveMode checks --mode and --estimate.
func (o *benchOptions) resolveMode() error {
	switch o.mode {
	case "decide":
		return nil
	case "reserve":
	default:
		return usagef("--mode: unknown mode %q (want decide or reserve)", o.mode)
	}
	if err := o.limit.CheckCost(o.estimate); err != nil {
		return usagef("--estimate: %v", err)
	}
	return nil
}

// runBenchReserve measures plain decisions and then, for as long, reserve
// and commit pairs on other keys, in the same process and on the same
// store, and prints the pairs' report with both rates and their ratio.
func runBenchReserve(ctx context.Context, o benchOptions, lim *limiter.Limiter, storeName string, stdout, stderr io.Writer) int {
	if !lim.Reserves() {
		fmt.Fprintf(stderr, "rl-exporter bench: --mode reserve: the %s store cannot hold reservations under %s\n", storeName, o.limit.Algorithm)
		return exitFailure
	}
	plain := func(ctx context.Context, key string) (bool, error) {
		d, err := lim.AllowN(ctx, key, o.estimate)
		return d.Allowed, err
	}
	pair := func(ctx context.Context, key string) (bool, error) {
		r, d, err := lim.Reserve(ctx, key, o.estimate)
		if err != nil || !d.Allowed {
			return false, err
		}
		_, err = lim.Commit(ctx, r, rand.Int64N(2*o.estimate+1))
		return err == nil, err
	}
	fmt.Fprintf(stderr, "rl-exporter bench: %s, %s %s, %d callers, %d keys (%s): plain decisions for %s, then reserve+commit pairs of %d for %s\n",
		storeName, o.limit.Algorithm, o.limitText, o.concurrency, o.keys, keyDistribution(o.zipf), o.duration, o.estimate, o.duration)
	var results [2]loadgen.Result
	for i, phase := range []struct {
		prefix string
		decide loadgen.DecideFunc
	}{{"k", plain}, {"r", pair}} {
		cfg := loadgen.Config{Duration: o.duration, Concurrency: o.concurrency, Keys: o.keys, Zipf: o.zipf, KeyPrefix: phase.prefix}
		res, err := loadgen.Run(ctx, cfg, phase.decide)
		if err != nil {
			fmt.Fprintf(stderr, "rl-exporter bench: %v\n", err)
			return exitFailure
		}
		results[i] = res
	}
	rep := newBenchReport(storeName, o, results[1])
	rep.Mode, rep.PlainDecisionsPerSecond = "reserve", results[0].DecisionsPerSecond()
	if rep.PlainDecisionsPerSecond > 0 {
		rep.ReserveRatio = rep.DecisionsPerSecond / rep.PlainDecisionsPerSecond
	}
	if o.json {
		return printBenchJSON(stdout, stderr, rep)
	}
	fmt.Fprintf(stdout, "plain        %.0f decisions/s (AllowN of %d)\n", rep.PlainDecisionsPerSecond, o.estimate)
	fmt.Fprintf(stdout, "reserve      %.0f reserve+commit pairs/s, %.2f× the plain decisions\n\n", rep.DecisionsPerSecond, rep.ReserveRatio)
	printBenchReport(stdout, rep, results[1])
	return exitOK
}
