package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/simulate"
)

// limitFlag is a --limit value: RATE/PERIOD.
type limitFlag struct {
	text   string
	rate   int64
	period time.Duration
}

func (f *limitFlag) String() string { return f.text }

// Set parses "60/m", "100/s", "1000/h", "5/ms", "10/30s" or "60/1m".
func (f *limitFlag) Set(s string) error {
	rateText, periodText, ok := strings.Cut(s, "/")
	if !ok {
		return errors.New("want RATE/PERIOD, e.g. 60/m or 10/30s")
	}
	rate, err := strconv.ParseInt(strings.TrimSpace(rateText), 10, 64)
	if err != nil || rate <= 0 {
		return fmt.Errorf("rate %q: want a whole number > 0", rateText)
	}
	var period time.Duration
	switch p := strings.TrimSpace(periodText); p {
	case "ms":
		period = time.Millisecond
	case "s", "sec", "second":
		period = time.Second
	case "m", "min", "minute":
		period = time.Minute
	case "h", "hour":
		period = time.Hour
	default:
		if period, err = time.ParseDuration(p); err != nil {
			return fmt.Errorf("period %q: want ms, s, m, h or a duration such as 30s", p)
		}
	}
	if err := (limiter.Limit{Algorithm: limiter.FixedWindow, Rate: rate, Period: period}).Validate(); err != nil {
		return err
	}
	if period%time.Microsecond != 0 {
		return fmt.Errorf("period %s: want a whole number of microseconds", period)
	}
	f.text, f.rate, f.period = s, rate, period
	return nil
}

// runSimulate is `rl-exporter simulate`.
func runSimulate(_ context.Context, args []string, _ environ, stdout, stderr io.Writer) int {
	fs := newFlagSet("simulate", "[--pattern NAME | --csv FILE | --regions N] [--limit RATE/PERIOD] [--svg FILE]",
		"Replays traffic in simulated time against each algorithm with the same limit, on the\n"+
			"memory store, and prints what each let through. Patterns: boundary-burst (RATE requests\n"+
			"just before the first window boundary and RATE just after), steady (1.5× the limit),\n"+
			"spiky (half the limit plus a spike every period), ramp (0 to 2× the limit).\n"+
			"With --regions N: N regions each send --rate requests/s on one key against one global\n"+
			"limit, and the region modes local, strict, async and hybrid are compared side by side.", stderr)
	lim := limitFlag{text: "60/m", rate: 60, period: time.Minute}
	fs.Var(&lim, "limit", "the limit, RATE/PERIOD: 60/m, 100/s, 1000/h, 10/30s")
	patternName := fs.String("pattern", string(simulate.BoundaryBurst), "traffic pattern: boundary-burst, steady, spiky or ramp")
	csvPath := fs.String("csv", "", "replay the timestamps in this CSV file instead of a pattern (first column: seconds since the start, or RFC 3339)")
	burst := fs.Int64("burst", 0, "bucket size of token_bucket, leaky_bucket and gcra (default: the rate)")
	duration := fs.Duration("duration", 0, "simulated time span (default: 3 periods for boundary-burst, 5 for the other patterns, the last CSV timestamp plus a period)")
	seed := fs.Uint64("seed", 1, "random seed of the spiky pattern")
	svgPath := fs.String("svg", "", "also write an SVG chart of the requests let through over time to this file")
	regions := fs.Int("regions", 0, "compare the region modes for this many `N` regions instead of the algorithms")
	perRegion := fs.Float64("rate", 0, "with --regions: requests per second each region sends, evenly spaced (default: the limit's rate per second, so that each region alone could fill it)")
	algorithm := fs.String("algorithm", string(limiter.FixedWindow), "with --regions: fixed_window, sliding_window, token_bucket or gcra")
	oneWay := fs.Duration("one-way", 50*time.Millisecond, "with --regions: latency between two regions, one way")
	syncInterval := fs.Duration("sync-interval", 100*time.Millisecond, "with --regions: how often each region ships its counts to the others (region.sync_interval)")
	hybridThreshold := fs.Float64("hybrid-threshold", simulate.DefaultHybridThreshold, "with --regions: share of the limit at which hybrid turns strict (hybrid_threshold)")
	if status, ok := parseFlags(fs, args); !ok {
		return status
	}
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "rl-exporter simulate: "+format+"\n", a...)
		return exitUsage
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["regions"] {
		return runSimulateRegions(fs, set, regionsFlags{
			regions: *regions, perRegion: *perRegion, algorithm: *algorithm, limit: lim, burst: *burst,
			oneWay: *oneWay, syncInterval: *syncInterval, hybridThreshold: *hybridThreshold, duration: *duration, svg: *svgPath,
		}, stdout, stderr)
	}
	for _, name := range regionOnlyFlags {
		if set[name] {
			return usageErr("--%s: only with --regions", name)
		}
	}
	if *burst < 0 {
		return usageErr("--burst: must be >= 0, got %d", *burst)
	}
	arrivals, title, status := simulateArrivals(set, patternFlags{
		pattern: *patternName, csv: *csvPath, limit: lim, duration: duration, seed: *seed,
	}, stdout, stderr)
	if status != exitOK {
		return status
	}
	run, err := simulate.Simulate(simulate.Config{Rate: lim.rate, Period: lim.period, Burst: *burst, Arrivals: arrivals, Duration: *duration})
	if err != nil {
		fmt.Fprintf(stderr, "rl-exporter simulate: %v\n", err)
		return exitFailure
	}
	if err := run.WriteTable(stdout); err != nil {
		fmt.Fprintf(stderr, "rl-exporter simulate: write table: %v\n", err)
		return exitFailure
	}
	if *svgPath == "" {
		return exitOK
	}
	opts := simulate.SVGOptions{Title: title, Generated: "Code generated by " + simulateCommandLine(fs, set) + "; DO NOT EDIT."}
	if err := writeSVG(*svgPath, run, opts); err != nil {
		fmt.Fprintf(stderr, "rl-exporter simulate: --svg: %v\n", err)
		return exitFailure
	}
	fmt.Fprintf(stdout, "wrote %s\n", *svgPath)
	return exitOK
}

// patternFlags are the values `simulate` reads to make its traffic.
type patternFlags struct {
	pattern, csv string
	limit        limitFlag
	duration     *time.Duration // set to the pattern's default when zero
	seed         uint64
}

// simulateArrivals checks the traffic flags and returns the arrival times
// of the requests (from the CSV file or the pattern) and the chart's
// title, or an exit status other than exitOK.
func simulateArrivals(set map[string]bool, f patternFlags, stdout, stderr io.Writer) ([]time.Duration, string, int) {
	usageErr := func(format string, a ...any) ([]time.Duration, string, int) {
		fmt.Fprintf(stderr, "rl-exporter simulate: "+format+"\n", a...)
		return nil, "", exitUsage
	}
	if set["pattern"] && set["csv"] {
		return usageErr("--pattern and --csv: give one or the other")
	}
	pattern, err := simulate.ParsePattern(f.pattern)
	if err != nil {
		return usageErr("--pattern: %v", err)
	}
	if set["duration"] && *f.duration <= 0 {
		return usageErr("--duration: must be > 0, got %s", *f.duration)
	}
	if set["csv"] && f.csv == "" {
		return usageErr("--csv: empty file name")
	}
	if f.csv != "" {
		arrivals, err := readArrivals(f.csv, *f.duration, stdout)
		if err != nil {
			fmt.Fprintf(stderr, "rl-exporter simulate: %v\n", err)
			return nil, "", exitFailure
		}
		return arrivals, "rl-exporter simulate: " + f.csv, exitOK
	}
	if *f.duration == 0 {
		*f.duration = pattern.DefaultDuration(f.limit.period)
	}
	arrivals, err := simulate.Generate(pattern, f.limit.rate, f.limit.period, *f.duration, f.seed)
	if err != nil {
		return usageErr("--duration/--limit: %v", err)
	}
	if len(arrivals) == 0 {
		return usageErr("--duration %s: too short for a single request of pattern %s at %s", *f.duration, pattern, f.limit.text)
	}
	return arrivals, "rl-exporter simulate: " + string(pattern), exitOK
}

// regionOnlyFlags are the flags of `simulate --regions`.
var regionOnlyFlags = []string{"rate", "algorithm", "one-way", "sync-interval", "hybrid-threshold"}

// regionsFlags are the values `simulate --regions` reads.
type regionsFlags struct {
	regions              int
	perRegion            float64
	algorithm            string
	limit                limitFlag
	burst                int64
	oneWay, syncInterval time.Duration
	hybridThreshold      float64
	duration             time.Duration
	svg                  string
}

// runSimulateRegions is `rl-exporter simulate --regions N`.
func runSimulateRegions(fs *flag.FlagSet, set map[string]bool, f regionsFlags, stdout, stderr io.Writer) int {
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "rl-exporter simulate: "+format+"\n", a...)
		return exitUsage
	}
	for _, name := range []string{"pattern", "csv", "seed"} {
		if set[name] {
			return usageErr("--%s: not with --regions, which sends a steady --rate from every region", name)
		}
	}
	switch {
	case f.regions < 1:
		return usageErr("--regions: %d, want 1 or more", f.regions)
	case set["rate"] && !(f.perRegion > 0):
		return usageErr("--rate: %v, want requests per second > 0", f.perRegion)
	case f.burst < 0:
		return usageErr("--burst: must be >= 0, got %d", f.burst)
	case f.oneWay < 0:
		return usageErr("--one-way: %s, want 0 or more", f.oneWay)
	case f.syncInterval <= 0:
		return usageErr("--sync-interval: %s, want more than 0", f.syncInterval)
	case !(f.hybridThreshold > 0 && f.hybridThreshold <= 1):
		return usageErr("--hybrid-threshold: %v, want a share of the limit in (0, 1]", f.hybridThreshold)
	case set["duration"] && f.duration < f.limit.period:
		return usageErr("--duration: %s, want at least one period of the limit (%s)", f.duration, f.limit.period)
	}
	alg := limiter.Algorithm(f.algorithm)
	if !slices.Contains(simulate.RegionAlgorithms, alg) {
		return usageErr("--algorithm %q: want one of fixed_window, sliding_window, token_bucket, gcra (the algorithms every region mode supports)", f.algorithm)
	}
	perRegion := f.perRegion
	if perRegion == 0 {
		perRegion = float64(f.limit.rate) / f.limit.period.Seconds()
	}
	run, err := simulate.SimulateRegions(simulate.RegionsConfig{
		Regions: f.regions, PerRegion: perRegion, Algorithm: alg,
		Rate: f.limit.rate, Period: f.limit.period, Burst: f.burst,
		OneWay: f.oneWay, SyncInterval: f.syncInterval, HybridThreshold: f.hybridThreshold,
		Duration: f.duration,
	})
	if err != nil {
		return usageErr("%v", err)
	}
	if err := run.WriteTable(stdout); err != nil {
		fmt.Fprintf(stderr, "rl-exporter simulate: write table: %v\n", err)
		return exitFailure
	}
	if f.svg == "" {
		return exitOK
	}
	opts := simulate.SVGOptions{
		Title:     fmt.Sprintf("rl-exporter simulate: %d regions, one global limit", f.regions),
		Generated: "Code generated by " + simulateCommandLine(fs, set) + "; DO NOT EDIT.",
	}
	if err := writeChartFile(f.svg, run.WriteSVG, opts); err != nil {
		fmt.Fprintf(stderr, "rl-exporter simulate: --svg: %v\n", err)
		return exitFailure
	}
	fmt.Fprintf(stdout, "wrote %s\n", f.svg)
	return exitOK
}

// readArrivals reads the timestamps of a CSV file; with a duration, only
// those before it, saying on stdout how many it kept.
func readArrivals(path string, duration time.Duration, stdout io.Writer) ([]time.Duration, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--csv: %w", err)
	}
	arrivals, err := simulate.ReadCSV(f, path)
	f.Close()
	if err != nil || duration <= 0 {
		return arrivals, err
	}
	total := len(arrivals)
	for len(arrivals) > 0 && arrivals[len(arrivals)-1] >= duration {
		arrivals = arrivals[:len(arrivals)-1]
	}
	if len(arrivals) == 0 {
		return nil, fmt.Errorf("--duration %s: every timestamp of %s is later", duration, path)
	}
	if len(arrivals) < total {
		fmt.Fprintf(stdout, "replaying the %d of %d timestamps before --duration %s\n", len(arrivals), total, duration)
	}
	return arrivals, nil
}

// simulateCommandLine is the command that reproduces a chart: the flags the
// user set, in a fixed order, without --svg.
func simulateCommandLine(fs *flag.FlagSet, set map[string]bool) string {
	parts := []string{"rl-exporter simulate"}
	for _, name := range []string{"regions", "pattern", "csv", "limit", "rate", "algorithm", "burst", "one-way", "sync-interval", "hybrid-threshold", "duration", "seed"} {
		if set[name] {
			parts = append(parts, "-"+name+" "+fs.Lookup(name).Value.String())
		}
	}
	return strings.Join(parts, " ")
}

// writeSVG writes the chart to a temporary file beside path and renames it,
// so a failed run never leaves a half-written chart.
func writeSVG(path string, run *simulate.Run, opts simulate.SVGOptions) error {
	return writeChartFile(path, run.WriteSVG, opts)
}

// writeChartFile writes a chart with write, as writeSVG does.
func writeChartFile(path string, write func(io.Writer, simulate.SVGOptions) error, opts simulate.SVGOptions) error {
	dir, base := ".", path
	if i := strings.LastIndexByte(path, '/'); i >= 0 {
		dir, base = path[:i+1], path[i+1:]
	}
	tmp, err := os.CreateTemp(dir, "."+base+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := write(tmp, opts); err != nil {
		tmp.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return os.Rename(tmp.Name(), path)
}
