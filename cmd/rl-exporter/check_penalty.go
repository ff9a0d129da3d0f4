package main

import (
	"fmt"
	"io"

	"github.com/rl-exporter/rl-exporter/config"
)

// printPenalties writes a line per class with a penalty box: when it
// closes, for how long, whether the instances share it, and how an
// operator lifts it.
func printPenalties(w io.Writer, cfg *config.Config) {
	scope := storeScope(cfg, "box")
	for _, class := range cfg.ClassNames() {
		p := cfg.Classes[class].Penalty
		if p.After < 1 {
			continue
		}
		within := p.Within.String()
		if p.WithinIsDefault() {
			within += " (penalty.within unset: the period of the " + cfg.Tiers.Default + " tier's limit)"
		}
		fmt.Fprintf(w, "  %s: penalty box, a key refused %d times within %s is refused for %s (429, status penalized), %s; the admin key reset lifts it\n",
			class, p.After, within, p.For, scope)
	}
}
