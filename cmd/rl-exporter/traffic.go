package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/rl-exporter/rl-exporter/config"
	"github.com/rl-exporter/rl-exporter/httplimit"
	"github.com/rl-exporter/rl-exporter/limiter"
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
	configFile := fs.String("config", "", "serve's config file: with server.overload on, the answers are also counted by the priority of each request's class and tier")
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
	if *configFile != "" {
		priority, err := trafficPriorities(*configFile)
		if err != nil {
			fmt.Fprintf(stderr, "rl-exporter traffic: --config: %v\n", err)
			return exitFailure
		}
		cfg.Priority = priority
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
				printTraffic(stdout, "", stats.Snapshot())
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
	printTraffic(stdout, "done, ", snap)
	return exitOK
}

// printTraffic writes a report: the normal and abusive clients' answers
// on one line, then a line per tier sent and per priority.
func printTraffic(w io.Writer, head string, snap traffic.Snapshot) {
	fmt.Fprintf(w, "traffic: %s%s\n", head, snap)
	for _, line := range snap.Breakdown() {
		fmt.Fprintf(w, "traffic:   %s\n", line)
	}
}

// trafficPriorities reads serve's config file and returns the priority of
// each request as serve's overload limit would admit it: its class's
// (matched as serve matches it) on the tier sent, the default tier when
// none is or it is not one of tiers.names.
func trafficPriorities(file string) (func(method, path, tier string) string, error) {
	cfg, err := config.Load(file)
	if err != nil {
		return nil, err
	}
	if !cfg.Server.Overload.Enabled {
		return nil, fmt.Errorf("%s does not turn server.overload on, so requests have no priority", file)
	}
	pc, err := cfg.PolicyConfig(limiter.NewMemoryStore(limiter.MemoryConfig{}), nil)
	if err != nil {
		return nil, err
	}
	policy, err := httplimit.NewPolicy(pc)
	if err != nil {
		return nil, err
	}
	return func(method, path, tier string) string {
		if !slices.Contains(cfg.Tiers.Names, tier) {
			tier = cfg.Tiers.Default
		}
		u, err := url.ParseRequestURI(path)
		if err != nil {
			u = &url.URL{Path: path}
		}
		r := &http.Request{Method: method, URL: u, Host: "traffic"}
		return cfg.Priority(policy.ClassOf(r), tier).String()
	}, nil
}
