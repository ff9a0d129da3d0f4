package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/rl-exporter/rl-exporter/config"
	"github.com/rl-exporter/rl-exporter/region"
	"github.com/rl-exporter/rl-exporter/rls"
)

// runCheck validates the file as serve would load it, the files it names
// (secrets, keys, admin tokens) included, but without the environment or
// flags of the machine it runs on: what is checked is the file. What a
// valid file leaves open (config.Exposure) is a warning, or a refusal.
func runCheck(_ context.Context, args []string, _ environ, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("config", "", "YAML config file to validate (required)")
	printDefaults := fs.Bool("print-defaults", false, "print the default of every key that has one, as YAML, and exit")
	strict := fs.Bool("strict-secrets", false, "refuse secret files (admin.tokens_file, password_file, key_file, secret_file) that group or others may read, instead of warning")
	oneWay := time.Duration(-1) // not given
	fs.Func("one-way", "one-way `latency` between regions (such as 50ms): print the overshoot bound of each class and tier in region_mode async or hybrid", func(s string) error {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			return fmt.Errorf("want a duration >= 0 such as 50ms, got %q", s)
		}
		oneWay = d
		return nil
	})
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: rl-exporter check --config FILE [--one-way LATENCY] [--strict-secrets]\n       rl-exporter check --print-defaults\n\nflags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "rl-exporter check: takes no arguments, got %q\n", fs.Args())
		return exitUsage
	}
	if *printDefaults {
		return printDefaultsTo(stdout, stderr)
	}
	if *file == "" {
		fmt.Fprintln(stderr, "rl-exporter check: --config FILE is required")
		fs.Usage()
		return exitUsage
	}
	cfg, err := config.Load(*file)
	if err != nil {
		printConfigProblems(stderr, "check", *file, err)
		return exitFailure
	}
	if !exposureAccepted(stderr, cfg, *file, *strict) {
		return exitFailure
	}
	domains := ""
	if cfg.Server.GRPCListen != "" {
		rules, err := rls.LoadDir(cfg.RLSConfigDir())
		if err != nil {
			printConfigProblems(stderr, "check", *file, fmt.Errorf("rls.config_dir: %w", err))
			return exitFailure
		}
		domains = fmt.Sprintf(", rls domains %s", strings.Join(rules.Domains(), " "))
		if cfg.RLQS.Enabled && !quotaRulesAccepted(stderr, rules) {
			return exitFailure
		}
	}
	fmt.Fprintf(stdout, "%s: valid (%d classes, %d tiers, store %s%s)\n", *file, len(cfg.Classes), len(cfg.Tiers.Names), cfg.Store.Type, domains)
	printLimits(stdout, cfg)
	printRegions(stdout, cfg, oneWay)
	printCalendars(stdout, cfg, time.Now())
	printOverload(stdout, cfg)
	printLeases(stdout, cfg)
	printShares(stdout, cfg)
	printPenalties(stdout, cfg)
	printPaths(stdout, cfg)
	return exitOK
}

// printRegions writes, for a config with a region block, the region mode
// of every class and tier that is not local and, given the one-way
// latency between regions (oneWay >= 0), the overshoot bound of each one
// decided asynchronously (async or hybrid).
func printRegions(w io.Writer, cfg *config.Config, oneWay time.Duration) {
	regions := cfg.Regions()
	if len(regions) == 0 {
		if oneWay >= 0 {
			fmt.Fprintln(w, "no region block (region.name is empty): every class is local, so there is no overshoot to bound")
		}
		return
	}
	r := cfg.Region
	fmt.Fprintf(w, "region %s of %d (%s), sync_interval %s\n", r.Name, len(regions), strings.Join(regions, ", "), r.SyncInterval)
	bounded := false
	for _, class := range cfg.ClassNames() {
		for _, tier := range cfg.Tiers.Names {
			m := cfg.RegionMode(class, tier)
			if m == region.ModeLocal {
				continue
			}
			lim := cfg.Classes[class].Limits[tier]
			if _, own := cfg.Classes[class].Limits[tier]; !own {
				lim = cfg.Classes[class].Limits[cfg.Tiers.Default]
			}
			opt := cfg.RegionStoreOptions(class, tier)
			line := fmt.Sprintf("  %s/%s: %s, %s %d per %s", class, tier, m, lim.Algorithm, lim.Rate, lim.PeriodText())
			if m == region.ModeHybrid {
				line += fmt.Sprintf(", hybrid_threshold %g", opt.HybridThreshold)
			}
			if (m == region.ModeStrict || m == region.ModeHybrid) && opt.Home != "" {
				line += ", home " + opt.Home + " (region.tier_homes)"
			}
			if m == region.ModeStrict || oneWay < 0 {
				fmt.Fprintln(w, line)
				continue
			}
			// The stated worst case: every other region admits the
			// limit's whole rate at once.
			otherRate := float64(lim.Rate) / lim.Period.Seconds() * float64(len(regions)-1)
			bound := region.OvershootBound(m, lim.Limiter(), len(regions), otherRate, oneWay, r.SyncInterval, opt.HybridThreshold)
			quota := float64(lim.Limiter().Quota())
			fmt.Fprintf(w, "%s: overshoot bound %.4g× (at most %.0f admitted where one Redis would admit %.0f), assuming the other %d region(s) admit %.4g/s together\n",
				line, bound, math.Floor(bound*quota+1e-9), quota, len(regions)-1, otherRate)
			bounded = true
		}
	}
	switch {
	case bounded:
		fmt.Fprintf(w, "  (bounds assume a one-way latency of %s between regions and, as the worst case, that the other regions together admit the limit's own rate × (regions − 1); see docs/multi-region.md)\n", oneWay)
	case oneWay >= 0:
		fmt.Fprintln(w, "  no class or tier uses region_mode async or hybrid: there is no overshoot to bound")
	}
}

// printConfigProblems writes a configuration error of the command cmd as a
// heading and one indented line per problem, the way check and serve both
// report a configuration that does not load.
func printConfigProblems(w io.Writer, cmd, source string, err error) {
	lines := strings.Split(err.Error(), "\n")
	fmt.Fprintf(w, "rl-exporter %s: %s is invalid (%d problem(s)):\n", cmd, source, len(lines))
	for _, l := range lines {
		fmt.Fprintf(w, "  %s\n", l)
	}
}

// exposureAccepted warns of what cfg, loaded from file, leaves open (secret
// files others may read, config.Exposure), and reports false, having
// printed why, when any of it is refused: a loose secret file with
// strict, an exposure that refuses.
func exposureAccepted(stderr io.Writer, cfg *config.Config, file string, strict bool) bool {
	if loose := cfg.LooseSecretFiles(); len(loose) > 0 {
		if strict {
			printConfigProblems(stderr, "check", file, errors.Join(loose...))
			return false
		}
		for _, err := range loose {
			fmt.Fprintf(stderr, "rl-exporter check: warning: %v\n", err)
		}
	}
	var refused []string
	for _, f := range cfg.Exposure() {
		line := fmt.Sprintf("config %s: %s", cfg.Source, f)
		if f.Refuse {
			refused = append(refused, line)
			continue
		}
		fmt.Fprintf(stderr, "rl-exporter check: warning: %s\n", line)
	}
	if len(refused) > 0 {
		printConfigProblems(stderr, "check", file, errors.New(strings.Join(refused, "\n")))
		return false
	}
	return true
}

// printDefaultsTo writes the default of every key that has one, as YAML.
func printDefaultsTo(stdout, stderr io.Writer) int {
	out, err := config.DefaultsYAML()
	if err != nil {
		fmt.Fprintf(stderr, "rl-exporter check: %v\n", err)
		return exitFailure
	}
	_, _ = stdout.Write(out)
	return exitOK
}

// printCalendars writes every limit whose windows are a calendar's, with
// the window holding now, so that its zone and boundaries can be checked.
func printCalendars(w io.Writer, cfg *config.Config, now time.Time) {
	for _, class := range cfg.ClassNames() {
		for _, tier := range cfg.Tiers.Names {
			limits, own := cfg.NamedLimits(class, tier)
			for _, lim := range limits {
				cal := lim.Limiter().Calendar
				if !own || cal == nil {
					continue
				}
				start, end := cal.Window(now)
				fmt.Fprintf(w, "  %s: %s %d per %s; this window [%s, %s), %s\n", limitName(cfg, class, tier, lim), lim.Algorithm, lim.Rate, lim.PeriodText(),
					start.In(cal.Location).Format(time.RFC3339), end.In(cal.Location).Format(time.RFC3339), end.Sub(start))
			}
		}
	}
}

// limitName is how check names a limit of class's tier: class/tier for a
// tier of one limit, class/tier[name] for one of a list's.
func limitName(cfg *config.Config, class, tier string, l config.NamedLimit) string {
	if cfg.Classes[class].Limits[tier].List == nil {
		return class + "/" + tier
	}
	return class + "/" + tier + "[" + l.Name + "]"
}

// printLimits writes every limit of every class and tier, a list's one
// per line: its name (a single limit's is its class's), the limit, whose
// budget it counts and what; a tier without limits of its own says so.
func printLimits(w io.Writer, cfg *config.Config) {
	fmt.Fprintln(w, "limits (class/tier name: limit, scope, unit):")
	for _, class := range cfg.ClassNames() {
		for _, tier := range cfg.Tiers.Names {
			limits, own := cfg.NamedLimits(class, tier)
			if !own {
				fmt.Fprintf(w, "  %s/%s: the default tier's (%s)\n", class, tier, cfg.Tiers.Default)
				continue
			}
			for _, l := range limits {
				var b strings.Builder
				if l.IsConcurrency() {
					fmt.Fprintf(&b, "concurrency, %d in flight", l.Limit.Limit)
				} else {
					fmt.Fprintf(&b, "%s %d per %s", l.Algorithm, l.Rate, l.PeriodText())
					if l.Burst > 0 {
						fmt.Fprintf(&b, ", burst %d", l.Burst)
					}
				}
				fmt.Fprintf(&b, ", scope %s, unit %s", l.Scope, l.Unit)
				if l.Shadow != nil {
					fmt.Fprintf(&b, ", shadow %v", *l.Shadow)
				}
				if p := l.Penalty; p != nil {
					fmt.Fprintf(&b, ", penalty after %d within %s for %s", p.After, p.Within, p.For)
				}
				fmt.Fprintf(w, "  %s/%s %s: %s\n", class, tier, l.Name, b.String())
			}
		}
	}
}

// quotaRulesAccepted names, on w, each rule of the domain files the quota service (rlqs.enabled)
// refuses, by file and path, and reports whether there was none.
func quotaRulesAccepted(w io.Writer, rules *rls.Rules) bool {
	ok := true
	for _, q := range rules.QuotaRules() {
		if q.Refused != "" {
			fmt.Fprintf(w, "rl-exporter check: rlqs: %s: %s: %s\n", q.File, q.Path, q.Refused)
			ok = false
		}
	}
	return ok
}
