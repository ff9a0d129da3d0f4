package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/rl-exporter/rl-exporter/config"
	"github.com/rl-exporter/rl-exporter/overload"
)

// printOverload explains server.overload: where its target comes from, the
// bounds of the limit, each priority's share of it and every class and tier's
// priority; off, it says so when priorities are set that would then do nothing.
func printOverload(w io.Writer, cfg *config.Config) {
	var set []string
	byPriority := map[overload.Priority][]string{}
	for _, class := range cfg.ClassNames() {
		for _, tier := range cfg.Tiers.Names {
			p := cfg.Priority(class, tier)
			byPriority[p] = append(byPriority[p], class+"/"+tier)
			if p != overload.Default {
				set = append(set, class+"/"+tier)
			}
		}
	}
	o := cfg.Server.Overload
	if !o.Enabled {
		if len(set) > 0 {
			fmt.Fprintf(w, "overload off (server.overload.enabled is false): the priorities of %s shed nothing\n", strings.Join(set, ", "))
		}
		return
	}
	oc, err := cfg.OverloadConfig()
	if err != nil { // Validate has refused the config already
		return
	}
	_, _, source, _ := cfg.OverloadTarget()
	target := "none: the latency baseline alone bounds the limit (set server.overload.target or slo_spec)"
	if oc.Target > 0 {
		target = fmt.Sprintf("p%g ≤ %s (from %s); the limit shrinks above %.0f%% of it", oc.Quantile*100, oc.Target, source, oc.Headroom*100)
	}
	r := oc.Reserve
	fmt.Fprintf(w, "overload on for %s: target %s\n", cfg.Server.Upstream, target)
	fmt.Fprintf(w, "  limit starts at %d within [%d, %d]; every %s (at least %d responses) it follows the mean latency against its %d-window baseline (tolerance %g×), smoothing %g, growing by %d\n",
		oc.InitialLimit, oc.MinLimit, oc.MaxLimit, oc.Window, oc.MinSamples, oc.LongWindow, oc.Tolerance, oc.Smoothing, oc.QueueSize)
	wait := "critical requests are shed at once at the limit"
	if oc.CriticalWait > 0 {
		wait = fmt.Sprintf("a critical request waits up to %s for a slot at the limit", oc.CriticalWait)
	}
	fmt.Fprintf(w, "  admitted while in flight is below: critical the limit, default %.0f%% of it, sheddable %.0f%%; %s; shed requests get 503 with Retry-After %s\n",
		100*(1-r), 100*(1-r)*(1-r), wait, o.RetryAfter)
	for _, p := range overload.Priorities {
		if list := byPriority[p]; len(list) > 0 {
			fmt.Fprintf(w, "  %s: %s\n", p, strings.Join(list, ", "))
		}
	}
}
