// Command compare measures rl-exporter's limiter side by side with its peers
// in one process run, against the same Redis and on the same machine, and
// prints one markdown table.
//
// On Redis it runs rl-exporter's store (gcra and fixed_window) beside
// github.com/go-redis/redis_rate/v10 (GCRA, the baseline) and
// github.com/ulule/limiter/v3 (its Redis store, a fixed window); in memory it
// runs rl-exporter's MemoryStore beside golang.org/x/time/rate behind a
// mutex-guarded map of keys (the baseline). Every run uses the same keys, the
// same callers and a limit high enough that every decision is allowed, so
// the figures measure the cost of deciding, not of refusing.
//
// Unless --redis-url is given it starts a private redis-server on a free
// port of 127.0.0.1 and stops it at the end.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rl-exporter/rl-exporter/loadgen"
)

// contender is one limiter under test.
type contender struct {
	// store is "redis" or "memory".
	store string
	// name is shown in the table.
	name string
	// baseline marks the limiter the others of its store are compared with.
	baseline bool
	// decide makes one decision for key.
	decide loadgen.DecideFunc
	// redisCPU, on Redis, reads the CPU the server has used (INFO cpu).
	redisCPU func(context.Context) (time.Duration, error)
}

// options are the flags.
type options struct {
	duration time.Duration
	warmup   time.Duration
	callers  []int
	keys     int
	redisURL string
	only     *regexp.Regexp
	cpuProf  string
	stores   map[string]bool
	// goBench > 0 measures the memory store with Go benchmarks instead of
	// the load generator, in that many interleaved rounds.
	goBench   int
	benchTime time.Duration
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	var callers, only, stores string
	fs.DurationVar(&o.duration, "duration", 3*time.Second, "measured time of each run")
	fs.DurationVar(&o.warmup, "warmup", 300*time.Millisecond, "unmeasured time before each run (loads scripts, fills connection pools)")
	fs.StringVar(&callers, "callers", "1,64,256", "comma-separated numbers of concurrent callers")
	fs.IntVar(&o.keys, "keys", 10000, "number of distinct keys, chosen uniformly")
	fs.StringVar(&o.redisURL, "redis-url", "", "Redis to use (default: a private redis-server started on a free port)")
	fs.StringVar(&only, "only", "", "run only the limiters whose name matches this regular expression")
	fs.StringVar(&stores, "stores", "redis,memory", "comma-separated stores to compare: redis, memory")
	fs.StringVar(&o.cpuProf, "cpuprofile", "", "write a CPU profile of the measured runs to this file")
	fs.IntVar(&o.goBench, "gobench", 0, "with --stores memory: measure with Go benchmarks (serial and parallel, no load generator) in this many interleaved rounds, and print the ratios")
	fs.DurationVar(&o.benchTime, "benchtime", time.Second, "with --gobench: time of each benchmark in each round")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if o.duration <= 0 {
		return o, fmt.Errorf("--duration: must be > 0, got %s", o.duration)
	}
	if o.warmup < 0 {
		return o, fmt.Errorf("--warmup: must be >= 0, got %s", o.warmup)
	}
	for _, c := range strings.Split(callers, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(c))
		if err != nil || n < 1 {
			return o, fmt.Errorf("--callers: %q is not a positive integer", c)
		}
		o.callers = append(o.callers, n)
	}
	if o.keys < 1 {
		return o, fmt.Errorf("--keys: must be >= 1, got %d", o.keys)
	}
	if o.goBench < 0 {
		return o, fmt.Errorf("--gobench: must be >= 0, got %d", o.goBench)
	}
	if o.benchTime <= 0 {
		return o, fmt.Errorf("--benchtime: must be > 0, got %s", o.benchTime)
	}
	var err error
	if o.only, err = regexp.Compile(only); err != nil {
		return o, fmt.Errorf("--only: %w", err)
	}
	o.stores = map[string]bool{}
	for _, s := range strings.Split(stores, ",") {
		switch s = strings.TrimSpace(s); s {
		case "redis", "memory":
			o.stores[s] = true
		default:
			return o, fmt.Errorf("--stores: unknown store %q (want redis or memory)", s)
		}
	}
	if o.goBench > 0 && (o.stores["redis"] || !o.stores["memory"]) {
		return o, errors.New("--gobench: measures the memory store only; add --stores memory")
	}
	return o, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "compare: %v\n", err)
		return 2
	}

	if o.goBench > 0 {
		if err := runGoBenchmarks(stdout, stderr, o.keys, o.goBench, o.benchTime); err != nil {
			fmt.Fprintf(stderr, "compare: %v\n", err)
			return 1
		}
		return 0
	}

	selected, redisDesc, cleanup, err := selectContenders(ctx, o)
	defer cleanup()
	if err != nil {
		fmt.Fprintf(stderr, "compare: %v\n", err)
		if errors.Is(err, errNoMatch) {
			return 2
		}
		return 1
	}

	if o.cpuProf != "" {
		f, err := os.Create(o.cpuProf)
		if err != nil {
			fmt.Fprintf(stderr, "compare: %v\n", err)
			return 1
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(stderr, "compare: cpu profile: %v\n", err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}

	started := time.Now()
	var rows []row
	// Callers in the outer loop: the limiters compared at one concurrency run
	// back to back, so that a change in the machine's load skews them alike.
	for _, n := range o.callers {
		for _, c := range selected {
			r, err := measure(ctx, c, n, o)
			if err != nil {
				fmt.Fprintf(stderr, "compare: %s, %d callers: %v\n", c.name, n, err)
				return 1
			}
			fmt.Fprintf(stderr, "%-7s %4d callers  %-34s %10.0f/s  p99 %s\n", c.store, n, c.name, r.res.DecisionsPerSecond(), r.res.Latency.Quantile(0.99))
			rows = append(rows, r)
		}
	}
	writeTable(stdout, rows, o, started, redisDesc)
	return 0
}

// errNoMatch: --only matched no contender (a usage error).
var errNoMatch = errors.New("matches no limiter")

// selectContenders builds the limiters o compares (starting a private
// redis-server unless --redis-url is given) and keeps those --only
// matches. cleanup releases what was started, also after an error.
func selectContenders(ctx context.Context, o options) (selected []contender, redisDesc string, cleanup func(), err error) {
	var undo []func()
	cleanup = func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	var contenders []contender
	if o.stores["redis"] {
		url := o.redisURL
		if url == "" {
			srv, err := startRedis(ctx)
			if err != nil {
				return nil, "", cleanup, err
			}
			undo = append(undo, srv.stop)
			url = srv.url
		}
		rc, desc, err := redisContenders(ctx, url)
		if err != nil {
			return nil, "", cleanup, err
		}
		undo = append(undo, rc.close)
		contenders = append(contenders, rc.contenders...)
		redisDesc = desc
	}
	if o.stores["memory"] {
		mc, err := memoryContenders()
		if err != nil {
			return nil, "", cleanup, err
		}
		contenders = append(contenders, mc...)
	}
	for _, c := range contenders {
		if o.only.MatchString(c.name) {
			selected = append(selected, c)
		}
	}
	if len(selected) == 0 {
		return nil, "", cleanup, fmt.Errorf("--only %q %w", o.only, errNoMatch)
	}
	return selected, redisDesc, cleanup, nil
}

type row struct {
	c       contender
	callers int
	res     loadgen.Result
	// redisUS is Redis's own CPU per decision (µs) of the measured run;
	// 0 off Redis.
	redisUS float64
}

func measure(ctx context.Context, c contender, callers int, o options) (row, error) {
	cfg := loadgen.Config{Concurrency: callers, Keys: o.keys, KeyPrefix: "compare:" + c.name + ":", Seed: 42}
	if o.warmup > 0 {
		cfg.Duration = o.warmup
		if _, err := loadgen.Run(ctx, cfg, c.decide); err != nil {
			return row{}, err
		}
	}
	runtime.GC()
	cfg.Duration = o.duration
	var cpu0 time.Duration
	if c.redisCPU != nil {
		var err error
		if cpu0, err = c.redisCPU(ctx); err != nil {
			return row{}, err
		}
	}
	res, err := loadgen.Run(ctx, cfg, c.decide)
	if err != nil {
		return row{}, err
	}
	if res.Errors > 0 && res.Errors == res.Decisions {
		return row{}, fmt.Errorf("all %d decisions failed, first: %w", res.Errors, res.FirstError)
	}
	r := row{c: c, callers: callers, res: res}
	if c.redisCPU != nil && res.Decisions > 0 {
		cpu1, err := c.redisCPU(ctx)
		if err != nil {
			return row{}, err
		}
		r.redisUS = float64((cpu1 - cpu0).Microseconds()) / float64(res.Decisions)
	}
	return r, nil
}

func writeTable(w io.Writer, rows []row, o options, started time.Time, redisDesc string) {
	fmt.Fprintf(w, "Measured %s on %s, %d CPUs (GOMAXPROCS %d), %s; %d keys chosen uniformly, %s per run after %s of warm-up, every decision allowed.\n",
		started.UTC().Format("2006-01-02 15:04 MST"), cpuModel(), runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version(), o.keys, o.duration, o.warmup)
	if redisDesc != "" {
		fmt.Fprintf(w, "Redis: %s.\n", redisDesc)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| store | callers | limiter | decisions/s | p50 | p99 | × baseline decisions/s | × baseline p99 |")
	fmt.Fprintln(w, "|---|---:|---|---:|---:|---:|---:|---:|")
	for _, r := range rows {
		var base *row
		for i := range rows {
			if rows[i].c.baseline && rows[i].c.store == r.c.store && rows[i].callers == r.callers {
				base = &rows[i]
			}
		}
		name := r.c.name
		if r.c.baseline {
			name += " (baseline)"
		}
		ratio, p99Ratio := "–", "–"
		if base != nil && base.res.DecisionsPerSecond() > 0 {
			ratio = fmt.Sprintf("%.2f×", r.res.DecisionsPerSecond()/base.res.DecisionsPerSecond())
			if bp := base.res.Latency.Quantile(0.99); bp > 0 {
				p99Ratio = fmt.Sprintf("%.2f×", float64(r.res.Latency.Quantile(0.99))/float64(bp))
			}
		}
		// Every decision should be allowed; say so when one was not.
		rejected := ""
		if r.res.Rejected > 0 {
			rejected += fmt.Sprintf(" (%d rejected)", r.res.Rejected)
		}
		if r.res.Errors > 0 {
			rejected += fmt.Sprintf(" (%d errors: %v)", r.res.Errors, r.res.FirstError)
		}
		fmt.Fprintf(w, "| %s | %d | %s | %s%s | %s | %s | %s | %s |\n", r.c.store, r.callers, name,
			humanRate(r.res.DecisionsPerSecond()), rejected, humanDuration(r.res.Latency.Quantile(0.5)),
			humanDuration(r.res.Latency.Quantile(0.99)), ratio, p99Ratio)
	}
	writeRedisCPU(w, rows)
}

// writeRedisCPU prints the Redis rows' cost to Redis itself: its own CPU
// (INFO cpu used_cpu_sys + used_cpu_user over the run) per decision, and
// the baseline's over each, the Redis-side ratio.
func writeRedisCPU(w io.Writer, rows []row) {
	header := false
	for _, r := range rows {
		if r.redisUS <= 0 {
			continue
		}
		if !header {
			fmt.Fprintln(w)
			fmt.Fprintln(w, "Redis's own CPU per decision (INFO cpu over each run; the server serves that limiter alone):")
			fmt.Fprintln(w)
			fmt.Fprintln(w, "| callers | limiter | Redis CPU µs/decision | baseline's ÷ this |")
			fmt.Fprintln(w, "|---:|---|---:|---:|")
			header = true
		}
		ratio := "–"
		for _, b := range rows {
			if b.c.baseline && b.c.store == r.c.store && b.callers == r.callers && b.redisUS > 0 {
				ratio = fmt.Sprintf("%.2f×", b.redisUS/r.redisUS)
			}
		}
		fmt.Fprintf(w, "| %d | %s | %.2f | %s |\n", r.callers, r.c.name, r.redisUS, ratio)
	}
}

func humanRate(v float64) string {
	switch {
	case v >= 10e6:
		return fmt.Sprintf("%.1fM", v/1e6)
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.1fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}

func humanDuration(d time.Duration) string {
	switch {
	case d >= time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/1e6)
	case d >= time.Microsecond:
		return fmt.Sprintf("%.1f µs", float64(d)/1e3)
	}
	return fmt.Sprintf("%d ns", d)
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

// redisInfo describes the server: version and address.
func redisInfo(ctx context.Context, c *redis.Client) string {
	info, err := c.Info(ctx, "server").Result()
	version := "unknown version"
	if err == nil {
		for _, line := range strings.Split(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
				version = v
			}
		}
	}
	return fmt.Sprintf("redis-server %s at %s, one client per limiter (go-redis %s, pool size %d)", version, c.Options().Addr, redis.Version(), c.Options().PoolSize)
}
