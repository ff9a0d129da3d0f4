package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
	"github.com/rl-exporter/rl-exporter/limiter/shares"
	"github.com/rl-exporter/rl-exporter/loadgen"
)

// benchOptions are the flags of rl-exporter bench, validated.
type benchOptions struct {
	store        string
	redisURL     string
	clusterAddrs []string
	limit        limiter.Limit
	limitText    string
	concurrency  int
	keys         int
	zipf         float64
	duration     time.Duration
	timeout      time.Duration
	json         bool
	// redisClient and redisAddr are set for --store redis.
	redisClient redisstore.ClientConfig
	redisAddr   string
	// mode is "decide", "reserve" or "lease" (bench_reserve.go), with the
	// estimate of reserve.
	mode     string
	estimate int64
	// limits is how many limits each request decides as one (bench_set.go),
	// the month's per organisation of orgs (0: per client).
	limits, orgs int
	// shares measures decisions from local shares beside plain ones
	// (bench_shares.go), with the shares' interval.
	shares         bool
	sharesInterval time.Duration
}

// usageError is a bad flag value: reported with the flag's name, exit 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

func parseBenchFlags(args []string, stderr io.Writer) (benchOptions, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o benchOptions
	var algorithm, clusterAddrs string
	var burst int64
	var poolSize int
	fs.StringVar(&o.store, "store", "memory", "store to measure: memory or redis")
	fs.StringVar(&o.redisURL, "redis-url", "", "Redis URL for --store redis, e.g. redis://127.0.0.1:6379/0")
	fs.StringVar(&clusterAddrs, "cluster-addrs", "", "comma-separated Redis Cluster node addresses for --store redis, e.g. redis-1:6379,redis-2:6379,redis-3:6379")
	fs.StringVar(&algorithm, "algorithm", string(limiter.GCRA), "algorithm: fixed_window, sliding_log, sliding_window, token_bucket, leaky_bucket or gcra")
	fs.StringVar(&o.limitText, "limit", "1000000/m", "limit per key: N/s, N/m, N/h or N/<duration> (e.g. 100/10s)")
	fs.Int64Var(&burst, "burst", 0, "bucket size of token_bucket, leaky_bucket and gcra (0 = the rate)")
	fs.IntVar(&o.concurrency, "concurrency", 64, "number of concurrent callers")
	fs.IntVar(&o.keys, "keys", 10000, "number of distinct keys")
	fs.Float64Var(&o.zipf, "zipf", 0, "key skew: 0 = uniform; s > 1 makes low-numbered keys hot (1.1 mild, 2 strong)")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "how long to run")
	fs.IntVar(&poolSize, "pool-size", 0, "connections per Redis node (0 = 10 per CPU)")
	fs.DurationVar(&o.timeout, "timeout", limiter.DefaultTimeout, "deadline of one store call; a call past it counts as an error")
	fs.BoolVar(&o.json, "json", false, "print the result as one JSON object on the last line of standard output")
	fs.StringVar(&o.mode, "mode", "decide", "decide: plain decisions; reserve (lease): plain decisions and, in turns with them for as long, reserve+commit (lease acquire+release) pairs, their ratio and CPU time; the commit (release) is sent without its caller waiting, as a proxy's after its response, and a pair counts once the store acknowledged it")
	fs.Int64Var(&o.estimate, "estimate", 1, "--mode reserve: units each reservation takes; it commits a random 0 to twice that")
	fs.IntVar(&o.limits, "limits", 1, "limits each request decides as one (limiter.Set), 1 to 3: the --algorithm --limit limit per client, a token_bucket of 7 tokens a request per client (gcra beside --algorithm token_bucket), a fixed_window calendar month per organisation; above 1 runs one limit and the sets in turns and prints their ratio and CPU time")
	fs.BoolVar(&o.shares, "shares", false, "--store redis: plain decisions and, in turns with them for as long, decisions from local shares of the limit (limiter/shares: chunks reserved from Redis, given back each --shares-interval), their ratio and CPU time")
	fs.DurationVar(&o.sharesInterval, "shares-interval", shares.DefaultInterval, "--shares: how long a chunk is used before its unused units go back")
	fs.IntVar(&o.orgs, "orgs", 100, "--limits 3: organisations, a client's being its number mod this; 0 counts the month per client (on a Cluster: every part in the client's slot)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "usage: rl-exporter bench [flags]\n\n"+
			"Runs concurrent callers against a limiter for a while and reports decisions per\n"+
			"second, allowed/rejected/errors and latency percentiles. Against Redis it writes\n"+
			"keys prefixed rl-exporter-bench: that expire on their own after the run.\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, usagef("unexpected argument %q", fs.Arg(0))
	}
	if err := o.resolveStore(clusterAddrs, poolSize); err != nil {
		return o, err
	}
	if err := o.resolveLimit(algorithm, burst); err != nil {
		return o, err
	}
	if err := o.resolveMode(); err != nil {
		return o, err
	}
	if err := o.resolveLimits(); err != nil {
		return o, err
	}
	return o, o.resolveShares()
}

// resolveStore checks the store flags and fills in the Redis client's
// configuration for --store redis.
func (o *benchOptions) resolveStore(clusterAddrs string, poolSize int) error {
	switch o.store {
	case "memory":
		if o.redisURL != "" || clusterAddrs != "" || poolSize != 0 {
			return usagef("--redis-url, --cluster-addrs and --pool-size need --store redis")
		}
		return nil
	case "redis":
	default:
		return usagef("--store: unknown store %q (want memory or redis)", o.store)
	}
	if clusterAddrs != "" {
		for _, a := range strings.Split(clusterAddrs, ",") {
			if a = strings.TrimSpace(a); a != "" {
				o.clusterAddrs = append(o.clusterAddrs, a)
			}
		}
		if len(o.clusterAddrs) == 0 {
			return usagef("--cluster-addrs: no address in %q", clusterAddrs)
		}
	}
	switch {
	case o.redisURL != "" && len(o.clusterAddrs) > 0:
		return usagef("--redis-url and --cluster-addrs: give one, not both")
	case o.redisURL == "" && len(o.clusterAddrs) == 0:
		return usagef("--store redis needs --redis-url or --cluster-addrs")
	}
	if poolSize < 0 {
		return usagef("--pool-size: must be >= 0, got %d", poolSize)
	}
	o.redisClient = redisstore.ClientConfig{URL: o.redisURL, ClusterAddrs: o.clusterAddrs, PoolSize: poolSize}
	opts, err := o.redisClient.Options()
	if err != nil {
		if o.redisURL != "" {
			return usagef("--redis-url: %v", err)
		}
		return usagef("--cluster-addrs: %v", err)
	}
	o.redisAddr = strings.Join(opts.Addrs, ",")
	return nil
}

// resolveLimit checks the limit and load flags and builds the limit.
func (o *benchOptions) resolveLimit(algorithm string, burst int64) error {
	alg, err := limiter.ParseAlgorithm(algorithm)
	if err != nil {
		return usagef("--algorithm: %v", err)
	}
	rate, period, err := parseRate(o.limitText)
	if err != nil {
		return usagef("--limit: %v", err)
	}
	o.limit = limiter.Limit{Algorithm: alg, Rate: rate, Period: period, Burst: burst}
	if err := o.limit.Validate(); err != nil {
		if strings.HasPrefix(err.Error(), "burst") {
			return usagef("--burst: %v", err)
		}
		return usagef("--limit: %v", err)
	}
	if o.concurrency < 1 {
		return usagef("--concurrency: must be at least 1, got %d", o.concurrency)
	}
	if o.keys < 1 || o.keys > loadgen.MaxKeys {
		return usagef("--keys: must be between 1 and %d, got %d", loadgen.MaxKeys, o.keys)
	}
	if o.zipf != 0 && !(o.zipf > 1) {
		return usagef("--zipf: must be 0 (uniform) or greater than 1, got %g", o.zipf)
	}
	if o.duration <= 0 {
		return usagef("--duration: must be > 0, got %s", o.duration)
	}
	return nil
}

// parseRate reads "N/s", "N/m", "N/h" or "N/<duration>" (e.g. "100/10s").
func parseRate(s string) (int64, time.Duration, error) {
	num, per, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok {
		return 0, 0, fmt.Errorf("%q: want N/s, N/m, N/h or N/<duration>", s)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
	if err != nil || n <= 0 {
		return 0, 0, fmt.Errorf("%q: the count %q is not a positive integer", s, num)
	}
	var d time.Duration
	switch per = strings.TrimSpace(per); per {
	case "s":
		d = time.Second
	case "m":
		d = time.Minute
	case "h":
		d = time.Hour
	default:
		d, err = time.ParseDuration(per)
		if err != nil || d <= 0 {
			return 0, 0, fmt.Errorf("%q: the period %q is not s, m, h or a positive duration like 10s", s, per)
		}
	}
	return n, d, nil
}

// benchReport is the --json output; its field names are a stable interface
// for scripts.
type benchReport struct {
	Store              string  `json:"store"`
	Algorithm          string  `json:"algorithm"`
	Limit              string  `json:"limit"`
	Concurrency        int     `json:"concurrency"`
	Keys               int     `json:"keys"`
	Zipf               float64 `json:"zipf"`
	DurationSeconds    float64 `json:"duration_seconds"`
	Decisions          uint64  `json:"decisions"`
	DecisionsPerSecond float64 `json:"decisions_per_second"`
	Allowed            uint64  `json:"allowed"`
	Rejected           uint64  `json:"rejected"`
	Errors             uint64  `json:"errors"`
	FirstError         string  `json:"first_error,omitempty"`
	P50Seconds         float64 `json:"p50_seconds"`
	P90Seconds         float64 `json:"p90_seconds"`
	P99Seconds         float64 `json:"p99_seconds"`
	P999Seconds        float64 `json:"p999_seconds"`
	MaxSeconds         float64 `json:"max_seconds"`
	// Mode is "reserve" or "lease" for those modes: the report is the
	// pairs', with the plain decisions' rate of the same run, the ratio
	// (ReserveRatio too for reserve) and the CPU time of one pair and of
	// one plain decision in Redis (INFO cpu; --store redis) and in this
	// process.
	Mode                     string  `json:"mode,omitempty"`
	PlainDecisionsPerSecond  float64 `json:"plain_decisions_per_second,omitempty"`
	ReserveRatio             float64 `json:"reserve_ratio,omitempty"`
	PairRatio                float64 `json:"pair_ratio,omitempty"`
	RedisCPUPerPairSeconds   float64 `json:"redis_cpu_per_pair_seconds,omitempty"`
	RedisCPUPerPlainSeconds  float64 `json:"redis_cpu_per_plain_seconds,omitempty"`
	ClientCPUPerPairSeconds  float64 `json:"client_cpu_per_pair_seconds,omitempty"`
	ClientCPUPerPlainSeconds float64 `json:"client_cpu_per_plain_seconds,omitempty"`
	// On Redis: Redis's own CPU (INFO cpu) and this process's per
	// decision, and the ceiling: the decisions per second and Redis CPU
	// per decision of full batches (of CeilingBatch) sent by one
	// connection with no limiter code (on a single Redis only).
	RedisCPUMicrosPerDecision        float64 `json:"redis_cpu_us_per_decision,omitempty"`
	OwnCPUMicrosPerDecision          float64 `json:"own_cpu_us_per_decision,omitempty"`
	CeilingDecisionsPerSecond        float64 `json:"ceiling_decisions_per_second,omitempty"`
	CeilingRedisCPUMicrosPerDecision float64 `json:"ceiling_redis_cpu_us_per_decision,omitempty"`
	CeilingBatch                     int     `json:"ceiling_batch,omitempty"`
	CeilingError                     string  `json:"ceiling_error,omitempty"`
	// Limits (above 1) is how many limits each request decided as one:
	// the report is the requests', with the single decisions' rate of the
	// same run (PlainDecisionsPerSecond), the ratio, and the CPU time of
	// one request and of one single decision (the Plain fields). SetScope
	// is, on a Cluster, "same-slot" or "cross-slot".
	Limits                 int     `json:"limits,omitempty"`
	SetScope               string  `json:"set_scope,omitempty"`
	SetRatio               float64 `json:"set_ratio,omitempty"`
	RedisCPUPerSetSeconds  float64 `json:"redis_cpu_per_set_seconds,omitempty"`
	ClientCPUPerSetSeconds float64 `json:"client_cpu_per_set_seconds,omitempty"`
	// Mode "shares" (--shares): the report is the decisions from shares',
	// with the plain decisions' rate of the same run, the ratio, the
	// chunks reserved and given back, and the CPU time of one decision
	// of each (the Plain fields).
	SharesRatio               float64 `json:"shares_ratio,omitempty"`
	SharesIntervalSeconds     float64 `json:"shares_interval_seconds,omitempty"`
	ShareReservations         int64   `json:"share_reservations,omitempty"`
	ShareGiveBacks            int64   `json:"share_give_backs,omitempty"`
	RedisCPUPerSharesSeconds  float64 `json:"redis_cpu_per_shares_decision_seconds,omitempty"`
	ClientCPUPerSharesSeconds float64 `json:"client_cpu_per_shares_decision_seconds,omitempty"`
}

// newBenchReport is the result of a run as --json prints it.
func newBenchReport(storeName string, o benchOptions, res loadgen.Result) benchReport {
	rep := benchReport{
		Store: storeName, Algorithm: string(o.limit.Algorithm), Limit: o.limitText,
		Concurrency: o.concurrency, Keys: o.keys, Zipf: o.zipf,
		DurationSeconds: res.Elapsed.Seconds(), Decisions: res.Decisions,
		DecisionsPerSecond: res.DecisionsPerSecond(),
		Allowed:            res.Allowed, Rejected: res.Rejected, Errors: res.Errors,
		P50Seconds:  res.Latency.Quantile(0.50).Seconds(),
		P90Seconds:  res.Latency.Quantile(0.90).Seconds(),
		P99Seconds:  res.Latency.Quantile(0.99).Seconds(),
		P999Seconds: res.Latency.Quantile(0.999).Seconds(),
		MaxSeconds:  res.Latency.Max().Seconds(),
	}
	if res.FirstError != nil {
		rep.FirstError = res.FirstError.Error()
	}
	return rep
}

func runBench(ctx context.Context, args []string, _ environ, stdout, stderr io.Writer) int {
	o, err := parseBenchFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		var ue usageError
		if errors.As(err, &ue) {
			fmt.Fprintf(stderr, "rl-exporter bench: %v\n", err)
		}
		// The flag package has already printed its own error and the usage.
		return exitUsage
	}

	store, storeName, rb, closeStore, err := openBenchStore(ctx, o)
	if err != nil {
		fmt.Fprintf(stderr, "rl-exporter bench: %v\n", err)
		return exitFailure
	}
	defer closeStore()
	lim, err := limiter.New(limiter.Config{Limit: o.limit, Store: store, Timeout: o.timeout})
	if err != nil {
		fmt.Fprintf(stderr, "rl-exporter bench: %v\n", err)
		return exitFailure
	}
	if o.shares {
		return runBenchShares(ctx, o, lim, store, storeName, stdout, stderr)
	}
	if o.limits > 1 {
		return runBenchSet(ctx, o, lim, store, storeName, stdout, stderr)
	}
	if o.mode != "decide" {
		return runBenchPairs(ctx, o, lim, store, storeName, stdout, stderr)
	}
	return runBenchDecide(ctx, o, lim, storeName, rb, stdout, stderr)
}

// runBenchDecide is bench's plain run: decisions of lim, one per call, reported with Redis's
// cost when rb is set.
func runBenchDecide(ctx context.Context, o benchOptions, lim *limiter.Limiter, storeName string, rb *benchRedis, stdout, stderr io.Writer) int {
	decide := func(ctx context.Context, key string) (bool, error) {
		d, err := lim.Allow(ctx, key)
		if err != nil {
			return false, err
		}
		return d.Allowed, nil
	}

	fmt.Fprintf(stderr, "rl-exporter bench: %s, %s %s, %d callers, %d keys (%s) for %s\n",
		storeName, o.limit.Algorithm, o.limitText, o.concurrency, o.keys, keyDistribution(o.zipf), o.duration)
	cfg := loadgen.Config{
		Duration:    o.duration,
		Concurrency: o.concurrency,
		Keys:        o.keys,
		Zipf:        o.zipf,
		KeyPrefix:   "k",
	}
	bar := newBenchProgress(stderr, o.duration, o.json)
	cfg.Progress = bar.stage(0, "")
	var cost *benchCost
	if rb != nil {
		cost = startCost(ctx, rb)
	}
	res, runErr := loadgen.Run(ctx, cfg, decide)
	bar.finish()
	if runErr != nil && res.Decisions == 0 {
		fmt.Fprintf(stderr, "rl-exporter bench: %v\n", runErr)
		return exitFailure
	}
	if runErr != nil {
		fmt.Fprintf(stderr, "rl-exporter bench: stopped early (%v); partial result:\n", runErr)
	}

	rep := newBenchReport(storeName, o, res)
	if cost != nil {
		rep.addRedisCost(ctx, cost, rb, o, res.Decisions)
	}
	if o.json {
		if code := printBenchJSON(stdout, stderr, rep); code != exitOK {
			return code
		}
	} else {
		printBenchReport(stdout, rep, res)
	}
	if runErr != nil {
		return exitFailure
	}
	return exitOK
}

// addRedisCost adds Redis's CPU and ours per decision of the run, then
// measures and adds the ceiling (on a single Redis).
func (rep *benchReport) addRedisCost(ctx context.Context, cost *benchCost, rb *benchRedis, o benchOptions, decisions uint64) {
	rep.RedisCPUMicrosPerDecision, rep.OwnCPUMicrosPerDecision = cost.perDecision(ctx, decisions)
	if len(o.clusterAddrs) > 0 {
		return
	}
	c, err := runCeiling(ctx, rb, o.limit, o.keys, o.duration)
	if err != nil {
		rep.CeilingError = err.Error()
		return
	}
	rep.CeilingDecisionsPerSecond, rep.CeilingRedisCPUMicrosPerDecision = c.perSecond(), c.redisCPUPerDec
	rep.CeilingBatch = c.batch
}

// printBenchJSON prints rep as one JSON line and returns the exit code.
func printBenchJSON(stdout, stderr io.Writer, rep benchReport) int {
	b, err := json.Marshal(rep)
	if err != nil {
		fmt.Fprintf(stderr, "rl-exporter bench: encode result: %v\n", err)
		return exitFailure
	}
	fmt.Fprintf(stdout, "%s\n", b)
	return exitOK
}

func keyDistribution(zipf float64) string {
	if zipf == 0 {
		return "uniform"
	}
	return fmt.Sprintf("zipf %g", zipf)
}

func printBenchReport(w io.Writer, r benchReport, res loadgen.Result) {
	pct := func(n uint64) float64 {
		if r.Decisions == 0 {
			return 0
		}
		return 100 * float64(n) / float64(r.Decisions)
	}
	fmt.Fprintf(w, "store        %s\n", r.Store)
	fmt.Fprintf(w, "limit        %s %s per key\n", r.Algorithm, r.Limit)
	fmt.Fprintf(w, "callers      %d, keys %d (%s)\n", r.Concurrency, r.Keys, keyDistribution(r.Zipf))
	fmt.Fprintf(w, "duration     %s\n", res.Elapsed.Round(time.Millisecond))
	fmt.Fprintf(w, "decisions    %d (%.0f/s)\n", r.Decisions, r.DecisionsPerSecond)
	fmt.Fprintf(w, "allowed      %d (%.1f%%)\n", r.Allowed, pct(r.Allowed))
	fmt.Fprintf(w, "rejected     %d (%.1f%%)\n", r.Rejected, pct(r.Rejected))
	fmt.Fprintf(w, "errors       %d (%.1f%%)\n", r.Errors, pct(r.Errors))
	if r.FirstError != "" {
		fmt.Fprintf(w, "first error  %s\n", r.FirstError)
	}
	h := res.Latency
	fmt.Fprintf(w, "latency      p50 %s  p90 %s  p99 %s  p99.9 %s  max %s\n",
		roundLatency(h.Quantile(0.5)), roundLatency(h.Quantile(0.9)), roundLatency(h.Quantile(0.99)),
		roundLatency(h.Quantile(0.999)), roundLatency(h.Max()))
	printRedisCost(w, r)
}

// printRedisCost prints the CPU lines of a run on Redis.
func printRedisCost(w io.Writer, r benchReport) {
	if r.RedisCPUMicrosPerDecision == 0 && r.OwnCPUMicrosPerDecision == 0 {
		return
	}
	fmt.Fprintf(w, "redis cpu    %.2f µs per decision (Redis's own, INFO cpu), ours %.2f µs per decision (this process)\n",
		r.RedisCPUMicrosPerDecision, r.OwnCPUMicrosPerDecision)
	switch {
	case r.CeilingError != "":
		fmt.Fprintf(w, "ceiling      not measured: %s\n", r.CeilingError)
	case r.CeilingBatch > 0:
		fmt.Fprintf(w, "ceiling      %.0f decisions/s at %.2f µs of Redis CPU per decision (batches of %d pipelined on one connection, no limiter code)\n",
			r.CeilingDecisionsPerSecond, r.CeilingRedisCPUMicrosPerDecision, r.CeilingBatch)
	}
}

// roundLatency keeps three significant digits or so.
func roundLatency(d time.Duration) time.Duration {
	switch {
	case d >= 100*time.Millisecond:
		return d.Round(time.Millisecond)
	case d >= 100*time.Microsecond:
		return d.Round(time.Microsecond)
	case d >= 10*time.Microsecond:
		return d.Round(100 * time.Nanosecond)
	}
	return d.Round(10 * time.Nanosecond)
}

// benchProgress draws a bar on a terminal: how far the run is, the
// decisions so far and their rate. It is nil, and the run silent until
// its report, when stderr is not a terminal or the report is --json (a
// script reads it).
type benchProgress struct {
	bar *progressbar.ProgressBar
}

func newBenchProgress(stderr io.Writer, total time.Duration, quiet bool) *benchProgress {
	f, ok := stderr.(*os.File)
	if quiet || !ok || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	return &benchProgress{bar: progressbar.NewOptions64(int64(total/time.Millisecond),
		progressbar.OptionSetWriter(stderr),
		progressbar.OptionSetWidth(30),
		progressbar.OptionSetPredictTime(false),
		progressbar.OptionSetElapsedTime(false),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionSetDescription("running"),
	)}
}

// stage returns the loadgen progress function of one part of the run,
// which starts offset into it: the bar shows the whole run, the text the
// part's decisions and rate, after what, when set ("turn 2/6, pairs").
// Nil on a nil p: no progress is asked for.
func (p *benchProgress) stage(offset time.Duration, what string) func(time.Duration, uint64) {
	if p == nil {
		return nil
	}
	if what != "" {
		what += ": "
	}
	return func(elapsed time.Duration, decisions uint64) {
		rate := 0.0
		if elapsed > 0 {
			rate = float64(decisions) / elapsed.Seconds()
		}
		p.bar.Describe(fmt.Sprintf("%s%d decisions, %.0f/s", what, decisions, rate))
		_ = p.bar.Set64(min(int64((offset+elapsed)/time.Millisecond), p.bar.GetMax64()))
	}
}

// finish clears the bar, so that the report starts on a clean line.
func (p *benchProgress) finish() {
	if p == nil {
		return
	}
	_ = p.bar.Finish()
	_ = p.bar.Clear()
}

// openBenchStore builds the store the flags name and checks that it
// answers; on Redis also its client and store (nil on the memory store).
func openBenchStore(ctx context.Context, o benchOptions) (limiter.Store, string, *benchRedis, func(), error) {
	switch o.store {
	case "memory":
		maxKeys := max(limiter.DefaultMemoryMaxKeys, o.keys)
		return limiter.NewMemoryStore(limiter.MemoryConfig{MaxKeys: maxKeys}), "memory", nil, func() {}, nil
	}
	rb, name, closeStore, err := openBenchRedis(ctx, o)
	if err != nil {
		return nil, "", nil, nil, err
	}
	return rb.store, name, rb, closeStore, nil
}

// openBenchRedis connects as rl-exporter serve does (redisstore.ClientConfig)
// and checks that Redis answers before the run starts.
func openBenchRedis(ctx context.Context, o benchOptions) (*benchRedis, string, func(), error) {
	client, err := o.redisClient.NewClient()
	if err != nil {
		return nil, "", nil, err
	}
	name := "redis " + o.redisAddr
	if len(o.clusterAddrs) > 0 {
		name = "redis cluster " + strings.Join(o.clusterAddrs, ",")
	}
	pingCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := client.Ping(pingCtx).Err(); err != nil {
		client.Close()
		return nil, "", nil, fmt.Errorf("%s: %w", name, err)
	}
	store, err := redisstore.New(client, redisstore.Config{Prefix: "rl-exporter-bench"})
	if err != nil {
		client.Close()
		return nil, "", nil, err
	}
	return &benchRedis{client: client, store: store}, name, func() { client.Close() }, nil
}
