package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/rl-exporter/rl-exporter/traffic"
)

// listFlag collects a repeatable, comma-separated flag.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error {
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			*l = append(*l, v)
		}
	}
	return nil
}

func runTraffic(ctx context.Context, args []string, _ environ, stdout, stderr io.Writer) int {
	fs := newFlagSet("traffic", "[flags]", "Sends requests through rl-exporter serve from many normal clients (each under its\n"+
		"limit) and a few abusive ones (far over it), and prints what each kind got.", stderr)
	var targets, tiers, normalPaths, abusivePaths listFlag
	fs.Var(&targets, "target", "base URL of a serve replica; repeat or separate with commas (default http://127.0.0.1:8480)")
	fs.Var(&tiers, "tiers", "plan tiers sent in X-Plan-Tier, one per client in turn, e.g. free,pro (default: no tier header)")
	fs.Var(&normalPaths, "normal-paths", `"METHOD /path" requests of the normal clients, comma-separated (default `+strings.Join(traffic.DefaultNormalPaths, ", ")+`)`)
	fs.Var(&abusivePaths, "abusive-paths", `"METHOD /path" requests of the abusive clients (default `+strings.Join(traffic.DefaultAbusivePaths, ", ")+`)`)
	normal := fs.Int("normal", traffic.DefaultNormal, "well-behaved clients")
	normalRate := fs.Float64("normal-rate", traffic.DefaultNormalRate, "requests per second of each normal client")
	abusive := fs.Int("abusive", traffic.DefaultAbusive, "abusive clients (0: none)")
	abusiveRate := fs.Float64("abusive-rate", traffic.DefaultAbusiveRate, "requests per second of each abusive client")
	duration := fs.Duration("duration", 0, "stop after this long (default: until interrupted)")
	every := fs.Duration("report-every", 2*time.Second, "print the counts this often")
	if status, ok := parseFlags(fs, args); !ok {
		return status
	}
	if len(targets) == 0 {
		targets = listFlag{"http://127.0.0.1:8480"}
	}
	if *every <= 0 {
		fmt.Fprintln(stderr, "rl-exporter traffic: --report-every must be above 0")
		return exitUsage
	}
	cfg := traffic.Config{
		Targets: targets, Tiers: tiers, NormalPaths: normalPaths, AbusivePaths: abusivePaths,
		Normal: *normal, NormalRate: *normalRate, Abusive: *abusive, AbusiveRate: *abusiveRate,
		NoAbusive: *abusive == 0,
	}
	if *normal < 1 || *abusive < 0 {
		fmt.Fprintln(stderr, "rl-exporter traffic: --normal must be at least 1 and --abusive at least 0")
		return exitUsage
	}
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(stderr, "rl-exporter %v\n", err)
		return exitFailure
	}
	if *duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *duration)
		defer cancel()
	}
	fmt.Fprintf(stdout, "traffic: %d normal clients at %g/s, %d abusive at %g/s, to %s\n",
		*normal, *normalRate, *abusive, *abusiveRate, strings.Join(targets, ", "))
	stats := &traffic.Stats{}
	// The reporter goroutine is the only writer to stdout while the run
	// lasts; stopped waits for it to return before the final line.
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(*every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				fmt.Fprintf(stdout, "traffic: %s\n", stats.Snapshot())
			}
		}
	}()
	snap, err := traffic.Run(ctx, cfg, stats)
	close(done)
	<-stopped
	if err != nil {
		fmt.Fprintf(stderr, "rl-exporter %v\n", err)
		return exitFailure
	}
	fmt.Fprintf(stdout, "traffic: done, %s\n", snap)
	return exitOK
}
