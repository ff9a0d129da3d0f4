package config

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

func TestAConcurrencyLimitReachesThePolicyAsLeases(t *testing.T) {
	c, err := Parse("rl.yaml", []byte(`
tiers: {names: [free, pro], default: free}
classes:
  default:
    limits:
      free: {algorithm: concurrency, limit: 5, lease_ttl: 2s}
      pro: {algorithm: concurrency, limit: 50}
  orders:
    routes: ["/orders"]
    limits:
      free: {algorithm: gcra, rate: 10, period: 1s}
`))
	if err != nil {
		t.Fatal(err)
	}
	pc, err := c.PolicyConfig(limiter.NewMemoryStore(limiter.MemoryConfig{}), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, cl := range pc.Classes {
		switch cl.Name {
		case "default":
			if len(cl.Limits) != 0 || cl.Leases["free"] != (limiter.LeaseLimit{Limit: 5, TTL: 2 * time.Second}) ||
				cl.Leases["pro"] != (limiter.LeaseLimit{Limit: 50, TTL: DefaultLeaseTTL}) {
				t.Fatalf("default class: limits %v, leases %v", cl.Limits, cl.Leases)
			}
		case "orders":
			if len(cl.Leases) != 0 || cl.Limits["free"].Algorithm != limiter.GCRA {
				t.Fatalf("orders class: limits %v, leases %v", cl.Limits, cl.Leases)
			}
		}
	}
}

func TestBadConcurrencyLimitsNameTheKey(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []parseErrorCase{
		{"no limit", "classes: {default: {limits: {default: {algorithm: concurrency}}}}\n", []string{"classes.default.limits.default.limit", ">= 1"}},
		{"a rate beside it", "classes: {default: {limits: {default: {algorithm: concurrency, limit: 5, rate: 3}}}}\n", []string{"classes.default.limits.default.rate", "not used by algorithm concurrency"}},
		{"a short lease_ttl", "classes: {default: {limits: {default: {algorithm: concurrency, limit: 5, lease_ttl: 1us}}}}\n", []string{"classes.default.limits.default.lease_ttl", "1ms"}},
		{"a lease_ttl over a day", "classes: {default: {limits: {default: {algorithm: concurrency, limit: 5, lease_ttl: 25h}}}}\n", []string{"classes.default.limits.default.lease_ttl", "at most 24h"}},
		{"limit on a rate limit", "classes: {default: {limits: {default: {algorithm: gcra, rate: 5, period: 1s, limit: 3}}}}\n", []string{"classes.default.limits.default.limit", "only for algorithm concurrency"}},
		{"across regions", "region: {name: a, peers: {b: {url: \"redis://127.0.0.1:1\"}}}\nclasses: {default: {region_mode: strict, limits: {default: {algorithm: concurrency, limit: 5}}}}\n", []string{"classes.default.limits.default", "region_mode strict does not support algorithm concurrency"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			file := filepath.Join(dir, "rl.yaml")
			_, err := Parse(file, []byte(c.yaml))
			if err == nil {
				t.Fatalf("no error for %q", c.yaml)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}
