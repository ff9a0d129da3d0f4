package config

import (
	"slices"
	"testing"

	"github.com/rl-exporter/rl-exporter/httplimit"
)

// The recipes' configs (docs/recipes.md) load and convert to the tier
// limits each recipe describes.
func TestTheRecipesConfigsConvertToTheirTierLimits(t *testing.T) {
	type limit struct {
		name  string
		unit  httplimit.Unit
		scope httplimit.ScopeKind
	}
	for _, c := range []struct {
		file, class, tier string
		want              []limit
	}{
		{"../examples/openai-style.yaml", "chat", "tier1", []limit{
			{"rpm", httplimit.UnitRequests, httplimit.ScopeClient}, {"tpm", httplimit.UnitCost, httplimit.ScopeClient},
			{"daily", httplimit.UnitCost, httplimit.ScopeClient}, {"monthly", httplimit.UnitCost, httplimit.ScopeHeader}}},
		{"../examples/github-style.yaml", "reads", "authenticated", []limit{
			{"hourly", httplimit.UnitRequests, httplimit.ScopeClient}, {"points", httplimit.UnitCost, httplimit.ScopeClient},
			{"concurrent", httplimit.UnitRequests, httplimit.ScopeClient}}},
		{"../examples/github-style.yaml", "writes", "authenticated", []limit{
			{"hourly", httplimit.UnitRequests, httplimit.ScopeClient}, {"points", httplimit.UnitCost, httplimit.ScopeClient},
			{"concurrent", httplimit.UnitRequests, httplimit.ScopeClient}}},
		{"../examples/saas-plan.yaml", "api", "business", []limit{
			{"burst", httplimit.UnitRequests, httplimit.ScopeClient}, {"monthly", httplimit.UnitRequests, httplimit.ScopeHeader},
			{"protection", httplimit.UnitRequests, httplimit.ScopeGlobal}}},
	} {
		t.Run(c.file+"/"+c.class, func(t *testing.T) {
			cfg, err := Load(c.file)
			if err != nil {
				t.Fatal(err)
			}
			var got []limit
			for _, l := range policyClass(t, cfg, c.class).TierLimits[c.tier] {
				got = append(got, limit{l.Name, l.Unit, l.Scope.Kind})
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("%s/%s: %+v, want %+v", c.class, c.tier, got, c.want)
			}
		})
	}
}
