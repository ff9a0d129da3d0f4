package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
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
	fs := newFlagSet("simulate", "[--pattern NAME | --csv FILE] [--limit RATE/PERIOD] [--svg FILE]",
		"Replays traffic in simulated time against each algorithm with the same limit, on the\n"+
			"memory store, and prints what each let through. Patterns: boundary-burst (RATE requests\n"+
			"just before the first window boundary and RATE just after), steady (1.5× the limit),\n"+
			"spiky (half the limit plus a spike every period), ramp (0 to 2× the limit).", stderr)
	lim := limitFlag{text: "60/m", rate: 60, period: time.Minute}
	fs.Var(&lim, "limit", "the limit, RATE/PERIOD: 60/m, 100/s, 1000/h, 10/30s")
	patternName := fs.String("pattern", string(simulate.BoundaryBurst), "traffic pattern: boundary-burst, steady, spiky or ramp")
	csvPath := fs.String("csv", "", "replay the timestamps in this CSV file instead of a pattern (first column: seconds since the start, or RFC 3339)")
	burst := fs.Int64("burst", 0, "bucket size of token_bucket, leaky_bucket and gcra (default: the rate)")
	duration := fs.Duration("duration", 0, "simulated time span (default: 3 periods for boundary-burst, 5 for the other patterns, the last CSV timestamp plus a period)")
	seed := fs.Uint64("seed", 1, "random seed of the spiky pattern")
	svgPath := fs.String("svg", "", "also write an SVG chart of the requests let through over time to this file")
	if status, ok := parseFlags(fs, args); !ok {
		return status
	}
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "rl-exporter simulate: "+format+"\n", a...)
		return exitUsage
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["pattern"] && set["csv"] {
		return usageErr("--pattern and --csv: give one or the other")
	}
	pattern, err := simulate.ParsePattern(*patternName)
	if err != nil {
		return usageErr("--pattern: %v", err)
	}
	if *burst < 0 {
		return usageErr("--burst: must be >= 0, got %d", *burst)
	}
	if set["duration"] && *duration <= 0 {
		return usageErr("--duration: must be > 0, got %s", *duration)
	}
	if set["csv"] && *csvPath == "" {
		return usageErr("--csv: empty file name")
	}

	var arrivals []time.Duration
	title := "rl-exporter simulate: " + string(pattern)
	if *csvPath != "" {
		f, err := os.Open(*csvPath)
		if err != nil {
			fmt.Fprintf(stderr, "rl-exporter simulate: --csv: %v\n", err)
			return exitFailure
		}
		arrivals, err = simulate.ReadCSV(f, *csvPath)
		f.Close()
		if err != nil {
			fmt.Fprintf(stderr, "rl-exporter simulate: %v\n", err)
			return exitFailure
		}
		if *duration > 0 {
			total := len(arrivals)
			for len(arrivals) > 0 && arrivals[len(arrivals)-1] >= *duration {
				arrivals = arrivals[:len(arrivals)-1]
			}
			if len(arrivals) == 0 {
				fmt.Fprintf(stderr, "rl-exporter simulate: --duration %s: every timestamp of %s is later\n", *duration, *csvPath)
				return exitFailure
			}
			if len(arrivals) < total {
				fmt.Fprintf(stdout, "replaying the %d of %d timestamps before --duration %s\n", len(arrivals), total, *duration)
			}
		}
		title = "rl-exporter simulate: " + *csvPath
	} else {
		if *duration == 0 {
			*duration = pattern.DefaultDuration(lim.period)
		}
		if arrivals, err = simulate.Generate(pattern, lim.rate, lim.period, *duration, *seed); err != nil {
			return usageErr("--duration/--limit: %v", err)
		}
		if len(arrivals) == 0 {
			return usageErr("--duration %s: too short for a single request of pattern %s at %s", *duration, pattern, lim.text)
		}
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

// simulateCommandLine is the command that reproduces a chart: the flags the
// user set, in a fixed order, without --svg.
func simulateCommandLine(fs *flag.FlagSet, set map[string]bool) string {
	parts := []string{"rl-exporter simulate"}
	for _, name := range []string{"pattern", "csv", "limit", "burst", "duration", "seed"} {
		if set[name] {
			parts = append(parts, "-"+name+" "+fs.Lookup(name).Value.String())
		}
	}
	return strings.Join(parts, " ")
}

// writeSVG writes the chart to a temporary file beside path and renames it,
// so a failed run never leaves a half-written chart.
func writeSVG(path string, run *simulate.Run, opts simulate.SVGOptions) error {
	dir, base := ".", path
	if i := strings.LastIndexByte(path, '/'); i >= 0 {
		dir, base = path[:i+1], path[i+1:]
	}
	tmp, err := os.CreateTemp(dir, "."+base+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := run.WriteSVG(tmp, opts); err != nil {
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
