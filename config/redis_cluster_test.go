package config

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
)

func TestRedisDialAndClusterKeysHaveDefaultsThatReachTheStore(t *testing.T) {
	file := filepath.Join(t.TempDir(), "rl.yaml")
	c, err := Parse(file, []byte("store: {type: redis, redis: {cluster_addrs: [\"127.0.0.1:7000\"]}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	cc, err := c.RedisClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cc.DialAttempts != redisstore.DefaultDialAttempts || cc.ClusterMaxRedirects != redisstore.DefaultClusterMaxRedirects || cc.ClusterReloadInterval != redisstore.DefaultClusterReloadInterval {
		t.Errorf("client config: dial attempts %d, max redirects %d, reload interval %s; want the defaults", cc.DialAttempts, cc.ClusterMaxRedirects, cc.ClusterReloadInterval)
	}
	if got := c.RedisStoreConfig().ClusterRefreshMinInterval; got != redisstore.DefaultClusterRefreshMinInterval {
		t.Errorf("store config: refresh min interval %s, want %s", got, redisstore.DefaultClusterRefreshMinInterval)
	}

	c, err = Parse(file, []byte("store: {type: redis, redis: {cluster_addrs: [\"127.0.0.1:7000\"], dial_attempts: 2, cluster: {refresh_min_interval: 250ms, reload_interval: 10s, max_redirects: 0}}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	cc, err = c.RedisClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	o, err := cc.Options()
	if err != nil {
		t.Fatal(err)
	}
	if o.DialerRetries != 2 || o.MaxRedirects != -1 || cc.ClusterReloadInterval != 10*time.Second {
		t.Errorf("go-redis options: dialer retries %d, max redirects %d (want -1: none), reload interval %s", o.DialerRetries, o.MaxRedirects, cc.ClusterReloadInterval)
	}
	if got := c.RedisStoreConfig().ClusterRefreshMinInterval; got != 250*time.Millisecond {
		t.Errorf("store config: refresh min interval %s, want 250ms", got)
	}
}

func TestInvalidRedisDialAndClusterKeysAreNamed(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name string
		yaml string
		want []string
	}{
		{"zero dial attempts", "dial_attempts: 0", []string{"store.redis.dial_attempts", "between 1 and 10, got 0"}},
		{"too many dial attempts", "dial_attempts: 11", []string{"store.redis.dial_attempts", "got 11"}},
		{"a zero refresh interval", "cluster: {refresh_min_interval: 0s}", []string{"store.redis.cluster.refresh_min_interval", "> 0"}},
		{"a negative reload interval", "cluster: {reload_interval: -1s}", []string{"store.redis.cluster.reload_interval", "> 0"}},
		{"too many redirects", "cluster: {max_redirects: 17}", []string{"store.redis.cluster.max_redirects", "between 0 and 16, got 17"}},
		{"an unknown cluster key", "cluster: {read_only: true}", []string{"store.redis.cluster", "read_only"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			file := filepath.Join(dir, "rl.yaml")
			_, err := Parse(file, []byte("store: {type: redis, redis: {cluster_addrs: [\"127.0.0.1:7000\"], "+c.yaml+"}}\n"))
			if err == nil {
				t.Fatalf("no error for %q", c.yaml)
			}
			for _, w := range append([]string{file}, c.want...) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}
