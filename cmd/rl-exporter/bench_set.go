package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// maxBenchLimits is the most limits --limits decides on one request: the
// flag's limit, a token_bucket of cost and a calendar month.
const maxBenchLimits = 3

// Shape of the set's other limits: each request takes setTokens of a
// bucket of setTokens times the flag's rate (so that it binds about when
// the flag's limit does), and one of a month's setMonthQuota.
const (
	setTokens     = 7
	setMonthQuota = 1 << 40
	maxBenchOrgs  = 1 << 20
)

// resolveLimits checks --limits and --orgs.
func (o *benchOptions) resolveLimits() error {
	if o.limits < 1 || o.limits > maxBenchLimits {
		return usagef("--limits: must be between 1 and %d, got %d", maxBenchLimits, o.limits)
	}
	if o.orgs < 0 || o.orgs > maxBenchOrgs {
		return usagef("--orgs: must be between 0 and %d, got %d", maxBenchOrgs, o.orgs)
	}
	if o.limits == 1 {
		return nil
	}
	if o.mode != "decide" {
		return usagef("--limits %d: several limits are decided in --mode decide, not %s", o.limits, o.mode)
	}
	if o.limits == 3 && o.orgs == 0 && o.limit.Algorithm == limiter.FixedWindow {
		return usagef("--orgs 0: the month's fixed_window limit per client would share the state of --algorithm fixed_window on the client's key")
	}
	return nil
}

// benchSetLimits are the limits of a set of n beside lim (the flag's,
// first): a token_bucket of cost (gcra when lim is a token_bucket: one key
// and algorithm are one state) and a fixed_window of a calendar month
// (UTC), with each request's costs.
func benchSetLimits(lim limiter.Limit, n int) ([]limiter.Limit, []int64) {
	cost := limiter.Limit{Algorithm: limiter.TokenBucket, Rate: lim.Rate, Period: lim.Period}
	if lim.Algorithm == limiter.TokenBucket {
		cost.Algorithm = limiter.GCRA
	}
	tokens := int64(1)
	if lim.Rate <= math.MaxInt64/setTokens {
		cost.Rate, tokens = lim.Rate*setTokens, setTokens
	}
	month := limiter.PerCalendar(setMonthQuota, &limiter.Calendar{Unit: limiter.Month, Location: time.UTC})
	return []limiter.Limit{lim, cost, month}[:n], []int64{1, tokens, 1}[:n]
}

// setScope says where a set's parts live: on a Cluster, all in the
// client's slot (per client) or the month's in its organisation's.
func setScope(o benchOptions) string {
	if len(o.clusterAddrs) == 0 {
		return ""
	}
	if o.limits < 3 || o.orgs == 0 {
		return "same-slot"
	}
	return "cross-slot"
}

// setBuf is one caller's keys, costs and answers of a set decision.
type setBuf struct {
	keys [maxBenchLimits]string
	out  [maxBenchLimits]limiter.Decision
}

// setOp is the contender that decides o.limits limits as one on each
// request: keys "s<i>", the month's on organisation "org<i mod orgs>"
// (the client's key with --orgs 0).
func setOp(o benchOptions, lim *limiter.Limiter, store limiter.Store) (*pairContender, string, error) {
	lims, costs := benchSetLimits(o.limit, o.limits)
	ls := []*limiter.Limiter{lim}
	for _, l := range lims[1:] {
		x, err := limiter.New(limiter.Config{Limit: l, Store: store, Timeout: o.timeout})
		if err != nil {
			return nil, "", fmt.Errorf("--limits: %w", err)
		}
		ls = append(ls, x)
	}
	set, err := limiter.NewSet(ls...)
	if err != nil {
		return nil, "", fmt.Errorf("--limits: %w", err)
	}
	orgs := make([]string, o.orgs)
	for i := range orgs {
		orgs[i] = "org" + strconv.Itoa(i)
	}
	const prefix = "s"
	pool := sync.Pool{New: func() any { return new(setBuf) }}
	n := o.limits
	op := func(ctx context.Context, key string) (bool, error) {
		b := pool.Get().(*setBuf)
		defer pool.Put(b)
		for i := range n {
			b.keys[i] = key
		}
		if n == 3 && len(orgs) > 0 {
			i, err := strconv.Atoi(strings.TrimPrefix(key, prefix))
			if err != nil {
				return false, fmt.Errorf("key %q: %w", key, err)
			}
			b.keys[2] = orgs[i%len(orgs)]
		}
		return set.Decide(ctx, limiter.ModeConsume, b.keys[:n], costs, b.out[:n])
	}
	what := make([]string, n)
	for i, l := range lims {
		what[i] = fmt.Sprintf("%s of %d", describeLimit(l), costs[i])
	}
	if n == 3 {
		what[2] += " per organisation"
		if o.orgs == 0 {
			what[2] = strings.TrimSuffix(what[2], " per organisation") + " per client"
		} else {
			what[2] += fmt.Sprintf(" (%d)", o.orgs)
		}
	}
	return &pairContender{prefix: prefix, name: "sets", op: op}, strings.Join(what, " + "), nil
}

// describeLimit is a limit in a few words: "sliding_window 1000000/1m0s".
func describeLimit(l limiter.Limit) string {
	if l.Calendar != nil {
		return fmt.Sprintf("%s %d/calendar %s", l.Algorithm, l.Rate, l.Calendar.Unit)
	}
	return fmt.Sprintf("%s %d/%s", l.Algorithm, l.Rate, l.Period)
}

// runBenchSet measures single decisions of the flag's limit and, in turns
// with them for as long, requests each deciding o.limits limits as one
// (limiter.Set), in the same process and on the same store, and prints
// the sets' report with both rates, their ratio and the CPU time a
// request costs Redis and this process.
func runBenchSet(ctx context.Context, o benchOptions, lim *limiter.Limiter, store limiter.Store, storeName string, stdout, stderr io.Writer) int {
	single := &pairContender{prefix: "k", name: "one limit", op: func(ctx context.Context, key string) (bool, error) {
		d, err := lim.Allow(ctx, key)
		return d.Allowed, err
	}}
	set, what, err := setOp(o, lim, store)
	var info *redisCPUReader
	closeInfo := func() {}
	if err == nil {
		info, closeInfo, err = openRedisCPU(o)
	}
	if err != nil {
		fmt.Fprintf(stderr, "rl-exporter bench: %v\n", err)
		return exitFailure
	}
	defer closeInfo()
	rounds := max(1, min(benchRounds, int(o.duration/minBenchRound)))
	scope := setScope(o)
	if scope != "" {
		scope = " (" + scope + ")"
	}
	fmt.Fprintf(stderr, "rl-exporter bench: %s, %d callers, %d keys (%s): one limit and sets of %d as one%s (%s), in %d turns each, %s in all each\n",
		storeName, o.concurrency, o.keys, keyDistribution(o.zipf), o.limits, scope, what, rounds, o.duration)
	if err := runInTurns(ctx, o, rounds, single, set, info, stderr); err != nil {
		fmt.Fprintf(stderr, "rl-exporter bench: %v\n", err)
		return exitFailure
	}
	rep := newBenchReport(storeName, o, set.res)
	rep.Limits, rep.SetScope = o.limits, setScope(o)
	rep.PlainDecisionsPerSecond = single.res.DecisionsPerSecond()
	rep.SetRatio = ratio(rep.DecisionsPerSecond, rep.PlainDecisionsPerSecond)
	rep.ClientCPUPerPlainSeconds, rep.ClientCPUPerSetSeconds = single.cpuPerOp(single.clientCPU), set.cpuPerOp(set.clientCPU)
	if info != nil {
		rep.RedisCPUPerPlainSeconds, rep.RedisCPUPerSetSeconds = single.cpuPerOp(single.redisCPU), set.cpuPerOp(set.redisCPU)
	}
	if o.json {
		return printBenchJSON(stdout, stderr, rep)
	}
	printSetReport(stdout, rep, what, info != nil)
	printBenchReport(stdout, rep, set.res)
	return exitOK
}

// printSetReport prints the head of a --limits report: both rates, their
// ratio and the CPU time of one request of each.
func printSetReport(w io.Writer, rep benchReport, what string, redisCPU bool) {
	scope := ""
	if rep.SetScope != "" {
		scope = ", " + rep.SetScope
	}
	fmt.Fprintf(w, "one limit    %.0f decisions/s (%s %s)\n", rep.PlainDecisionsPerSecond, rep.Algorithm, rep.Limit)
	fmt.Fprintf(w, "%d limits     %.0f requests/s, %.2f× one limit (%s%s)\n", rep.Limits, rep.DecisionsPerSecond, rep.SetRatio, what, scope)
	us := func(s float64) string { return strconv.FormatFloat(s*1e6, 'f', 1, 64) + "µs" }
	if redisCPU {
		fmt.Fprintf(w, "redis cpu    %s a request of %d limits, %s a decision of one (%.2f×)\n",
			us(rep.RedisCPUPerSetSeconds), rep.Limits, us(rep.RedisCPUPerPlainSeconds), ratio(rep.RedisCPUPerSetSeconds, rep.RedisCPUPerPlainSeconds))
	}
	fmt.Fprintf(w, "client cpu   %s a request of %d limits, %s a decision of one (%.2f×)\n\n",
		us(rep.ClientCPUPerSetSeconds), rep.Limits, us(rep.ClientCPUPerPlainSeconds), ratio(rep.ClientCPUPerSetSeconds, rep.ClientCPUPerPlainSeconds))
}
