package config

import (
	"path/filepath"
	"strings"
	"testing"
)

// A WAIT that outlives the Redis client's read timeout turns every write into a timeout, so
// durability_timeout must stay below it: the default 500ms, or the read_timeout of the URL.
func TestDurabilityTimeoutMustBeBelowTheRedisReadTimeout(t *testing.T) {
	file := filepath.Join(t.TempDir(), "rl.yaml")
	for _, tc := range []struct {
		name, yaml string
		want       []string // "" when valid
	}{
		{"below the default read timeout", `{url: "redis://127.0.0.1:1", durability: wait, durability_timeout: 499ms}`, nil},
		{"at the default read timeout", `{url: "redis://127.0.0.1:1", durability: wait, durability_timeout: 500ms}`,
			[]string{"store.redis.durability_timeout: 500ms", "read timeout of store.redis's Redis client (500ms)", "lower it below 500ms", "?read_timeout="}},
		{"over it through Sentinel", `{sentinel_addrs: ["127.0.0.1:1"], sentinel_master: m, durability: wait, durability_timeout: 800ms}`,
			[]string{"store.redis.durability_timeout: 800ms", "store.redis's Redis client (500ms)", "lower it below 500ms"}},
		{"below a read timeout raised in the URL", `{url: "redis://127.0.0.1:1?read_timeout=2s", durability: wait, durability_timeout: 800ms}`, nil},
		{"over a read timeout lowered in the URL", `{url: "redis://127.0.0.1:1?read_timeout=200ms", durability: wait, durability_timeout: 300ms}`,
			[]string{"store.redis.durability_timeout: 300ms", "(200ms)"}},
		{"with no read timeout in the URL", `{url: "redis://127.0.0.1:1?read_timeout=-1", durability: wait, durability_timeout: 800ms}`, nil},
		{"over it with durability none", `{url: "redis://127.0.0.1:1", durability: none, durability_timeout: 800ms}`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(file, []byte("store: {type: redis, timeout: 3s, redis: "+tc.yaml+"}\n"))
			if tc.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// Every region writes with store.redis's durability, so each peer's client bounds it too.
func TestDurabilityTimeoutMustBeBelowEachRegionPeersReadTimeout(t *testing.T) {
	file := filepath.Join(t.TempDir(), "rl.yaml")
	_, err := Parse(file, []byte(`store: {type: redis, timeout: 3s, redis: {url: "redis://127.0.0.1:1?read_timeout=2s", durability: wait, durability_timeout: 800ms}}
region: {name: a, peers: {b: {url: "redis://127.0.0.1:2"}}}
classes: {default: {limits: {default: {algorithm: gcra, rate: 10, period: 1s}}}}
`))
	if err == nil {
		t.Fatal("accepted a durability_timeout over peer b's read timeout")
	}
	for _, w := range []string{"store.redis.durability_timeout: 800ms", "region.peers.b's Redis client (500ms)", "region.peers.b.url"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
}
