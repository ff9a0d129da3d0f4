package config

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/region"
)

// twoRegions is a valid multi-region file: this region and one peer, on Redis.
const twoRegions = `
store: {type: redis, redis: {url: "redis://127.0.0.1:1", pool_size: 7, dial_attempts: 2}}
tiers: {names: [free, enterprise], default: free}
region:
  name: us-east-1
  peers:
    ap-northeast-1: {url: "redis://127.0.0.1:2"}
  tier_homes: {enterprise: ap-northeast-1}
classes:
  billing: {region_mode: strict, limits: {free: {algorithm: gcra, rate: 100, period: 1m}}}
  public:
    region_mode: hybrid
    hybrid_threshold: 0.7
    limits:
      free: {algorithm: sliding_window, rate: 1000, period: 1m, region_mode: async}
      enterprise: {algorithm: token_bucket, rate: 5000, period: 1m}
  default: {limits: {free: {algorithm: sliding_log, rate: 10, period: 1s}}}
`

func TestARegionBlockIsReadWithItsDefaultsAndEachTierGetsItsMode(t *testing.T) {
	c, err := Parse("rl.yaml", []byte(twoRegions))
	if err != nil {
		t.Fatal(err)
	}
	if c.Region.SyncInterval != 100*time.Millisecond || c.Region.SyncTimeout != time.Second {
		t.Errorf("sync_interval %s, sync_timeout %s; want the defaults 100ms and 1s", c.Region.SyncInterval, c.Region.SyncTimeout)
	}
	if got := strings.Join(c.Regions(), " "); got != "ap-northeast-1 us-east-1" {
		t.Errorf("regions %q, want both, sorted", got)
	}
	for _, m := range []struct {
		class, tier string
		want        region.Mode
	}{
		{"billing", "free", region.ModeStrict},
		{"billing", "enterprise", region.ModeStrict}, // no limit of its own: the default tier's
		{"public", "free", region.ModeAsync},         // the tier overrides the class
		{"public", "enterprise", region.ModeHybrid},
		{"default", "free", region.ModeLocal},
	} {
		if got := c.RegionMode(m.class, m.tier); got != m.want {
			t.Errorf("RegionMode(%s, %s) = %s, want %s", m.class, m.tier, got, m.want)
		}
	}
	if got := c.RegionStoreOptions("public", "enterprise"); got.HybridThreshold != 0.7 || got.Home != "ap-northeast-1" {
		t.Errorf("public/enterprise options %+v, want threshold 0.7 and home ap-northeast-1", got)
	}
	if got := c.RegionStoreOptions("billing", "free"); got.HybridThreshold != DefaultHybridThreshold || got.Home != "" {
		t.Errorf("billing/free options %+v, want the default threshold and a hashed home", got)
	}
	if got := c.RegionModes(); len(got) != 3 {
		t.Errorf("modes in use %v, want async, hybrid and strict", got)
	}
	// A peer takes store.redis's connection settings it leaves unset.
	cc, err := c.PeerClientConfig("ap-northeast-1")
	if err != nil {
		t.Fatal(err)
	}
	if cc.PoolSize != 7 || cc.DialAttempts != 2 || cc.URL != "redis://127.0.0.1:2" {
		t.Errorf("peer client config %+v, want store.redis's pool_size 7 and dial_attempts 2 with its own URL", cc)
	}
}

func TestWithoutARegionBlockEveryClassIsLocal(t *testing.T) {
	c := Default()
	if c.Regions() != nil || len(c.RegionModes()) != 0 || c.RegionMode("default", "default") != region.ModeLocal {
		t.Errorf("built-in config: regions %v, modes %v", c.Regions(), c.RegionModes())
	}
}

func TestInvalidRegionKeysAreNamedWithTheReason(t *testing.T) {
	const redis = "store: {type: redis, redis: {url: \"redis://127.0.0.1:1\"}}\n"
	const peers = "region: {name: eu, peers: {us: {url: \"redis://127.0.0.1:2\"}}}\n"
	cases := []parseErrorCase{
		{"an unknown mode names the class and the choices",
			redis + peers + "classes: {api: {region_mode: global, limits: {default: {algorithm: gcra, rate: 1, period: 1s}}}}\n",
			[]string{"classes.api.region_mode", `"global"`, "strict"}},
		{"an unknown mode of a tier names the tier",
			redis + peers + "classes: {api: {limits: {default: {algorithm: gcra, rate: 1, period: 1s, region_mode: eventually}}}}\n",
			[]string{"classes.api.limits.default.region_mode", `"eventually"`}},
		{"an algorithm the mode does not support names the class, the tier and the supported algorithms",
			redis + peers + "classes: {api: {region_mode: async, limits: {default: {algorithm: sliding_log, rate: 1, period: 1s}}}}\n",
			[]string{"classes.api.limits.default", "class api tier default", "region_mode async does not support algorithm sliding_log",
				algorithmList(region.Algorithms(region.ModeAsync))}},
		{"a strict class without a region block asks for region.name and a peer",
			redis + "classes: {api: {region_mode: strict, limits: {default: {algorithm: gcra, rate: 1, period: 1s}}}}\n",
			[]string{"region.name: required: needed by classes.api (strict)", "region.peers: at least one peer region is required"}},
		{"an async tier on the memory store asks for Redis",
			peers + "classes: {api: {limits: {default: {algorithm: gcra, rate: 1, period: 1s, region_mode: async}}}}\n",
			[]string{"store.type", "must be redis", "classes.api.limits.default (async)"}},
		{"a region name on the memory store",
			peers,
			[]string{"store.type", "region.name turns multi-region on", "must be redis"}},
		{"a region without peers is refused when a class needs them",
			redis + "region: {name: eu}\nclasses: {api: {region_mode: hybrid, limits: {default: {algorithm: gcra, rate: 1, period: 1s}}}}\n",
			[]string{"region.peers: at least one peer"}},
		{"a peer named like this region",
			redis + "region: {name: eu, peers: {eu: {url: \"redis://127.0.0.1:2\"}}}\n",
			[]string{"region.peers.eu", "is region.name"}},
		{"a region name that cannot be a label",
			redis + "region: {name: \"eu west\", peers: {us: {url: \"redis://127.0.0.1:2\"}}}\n",
			[]string{"region.name", "letters, digits"}},
		{"a peer without an address",
			redis + "region: {name: eu, peers: {us: {pool_size: 3}}}\n",
			[]string{"region.peers.us"}},
		{"a peer with a bad URL names its key",
			redis + "region: {name: eu, peers: {us: {url: \"http://x\"}}}\n",
			[]string{"region.peers.us.url"}},
		{"a peer with a prefix of its own",
			redis + "region: {name: eu, peers: {us: {url: \"redis://127.0.0.1:2\", prefix: other}}}\n",
			[]string{"region.peers.us.prefix", "store.redis.prefix"}},
		{"a tier home that is not a region",
			redis + "region: {name: eu, peers: {us: {url: \"redis://127.0.0.1:2\"}}, tier_homes: {default: mars}}\n",
			[]string{"region.tier_homes.default", `"mars" is not a region`}},
		{"a tier home for an unknown tier",
			redis + "region: {name: eu, peers: {us: {url: \"redis://127.0.0.1:2\"}}, tier_homes: {gold: us}}\n",
			[]string{"region.tier_homes.gold", "unknown tier"}},
		{"a hybrid threshold of 1",
			redis + peers + "classes: {api: {region_mode: hybrid, hybrid_threshold: 1, limits: {default: {algorithm: gcra, rate: 1, period: 1s}}}}\n",
			[]string{"classes.api.hybrid_threshold", "(0, 1), got 1"}},
		{"a hybrid threshold of 0",
			redis + peers + "classes: {api: {region_mode: hybrid, hybrid_threshold: 0, limits: {default: {algorithm: gcra, rate: 1, period: 1s}}}}\n",
			[]string{"classes.api.hybrid_threshold", "got 0"}},
		{"a hybrid threshold on a class that is not hybrid",
			redis + peers + "classes: {api: {region_mode: strict, hybrid_threshold: 0.5, limits: {default: {algorithm: gcra, rate: 1, period: 1s}}}}\n",
			[]string{"classes.api.hybrid_threshold", "hybrid only"}},
		{"a zero sync interval",
			"region: {sync_interval: 0s}\n",
			[]string{"region.sync_interval", "> 0"}},
		{"a sync timeout without a unit",
			"region: {sync_timeout: 5}\n",
			[]string{"region.sync_timeout", "without a unit"}},
		{"an unknown region key",
			"region: {home: eu}\n",
			[]string{"region.home", "unknown key"}},
	}
	checkParseErrors(t, cases)
}

func TestOnePassReportsEveryRegionProblem(t *testing.T) {
	_, err := Parse("rl.yaml", []byte(`
region: {name: eu, sync_interval: 0s, peers: {eu: {url: "redis://127.0.0.1:2"}}, tier_homes: {default: mars}}
classes:
  api: {region_mode: async, limits: {default: {algorithm: leaky_bucket, rate: 1, period: 1s}}}
  web: {region_mode: sometimes, limits: {default: {algorithm: gcra, rate: 1, period: 1s}}}
default_class: api
`))
	if err == nil {
		t.Fatal("no error")
	}
	var j interface{ Unwrap() []error }
	if !errors.As(err, &j) {
		t.Fatalf("not a joined error: %v", err)
	}
	var keys []string
	for _, e := range j.Unwrap() {
		keys = append(keys, strings.SplitN(strings.TrimPrefix(e.Error(), "config rl.yaml: "), ":", 2)[0])
	}
	want := []string{"region.sync_interval", "region.peers.eu", "region.tier_homes.default",
		"classes.api.limits.default", "classes.web.region_mode", "store.type"}
	for _, w := range want {
		found := false
		for _, k := range keys {
			found = found || k == w
		}
		if !found {
			t.Errorf("no problem reported at %s; got %v", w, keys)
		}
	}
}

func TestAReloadThatChangesTheRegionBlockNeedsARestartAndOneThatChangesAModeDoesNot(t *testing.T) {
	old, err := Parse("rl.yaml", []byte(twoRegions))
	if err != nil {
		t.Fatal(err)
	}
	moved, err := Parse("rl.yaml", []byte(strings.Replace(twoRegions, "tier_homes: {enterprise: ap-northeast-1}", "tier_homes: {enterprise: us-east-1}", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if got := RestartRequired(old, moved); strings.Join(got, " ") != "region.tier_homes" {
		t.Errorf("a changed tier home: restart required for %v, want [region.tier_homes]", got)
	}
	mode, err := Parse("rl.yaml", []byte(strings.Replace(twoRegions, "billing: {region_mode: strict", "billing: {region_mode: async", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if mode.RegionMode("billing", "free") != region.ModeAsync {
		t.Fatalf("billing is %s after the change", mode.RegionMode("billing", "free"))
	}
	if got := RestartRequired(old, mode); len(got) != 0 {
		t.Errorf("a changed class mode: restart required for %v, want none (it applies on reload)", got)
	}
}
