package redisstore_test

import (
	"strings"
	"testing"

	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
)

func TestClientConfigOptions(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     redisstore.ClientConfig
		wantErr string
	}{
		{"nothing set is an error naming the three choices", redisstore.ClientConfig{}, "exactly one of url, cluster addresses or sentinel addresses"},
		{"a url and cluster addresses together are an error", redisstore.ClientConfig{URL: "redis://a:1", ClusterAddrs: []string{"b:2"}}, "exactly one"},
		{"sentinel addresses without a master name are an error", redisstore.ClientConfig{SentinelAddrs: []string{"s:26379"}}, "master name is required"},
		{"a master name without sentinel addresses is an error", redisstore.ClientConfig{URL: "redis://a:1", MasterName: "m"}, "no sentinel addresses"},
		{"a malformed url is an error", redisstore.ClientConfig{URL: "http://a:1"}, "redis url"},
		{"a cluster with a database number is an error", redisstore.ClientConfig{ClusterAddrs: []string{"a:1"}, DB: 2}, "db must be 0"},
		{"an empty cluster address is an error", redisstore.ClientConfig{ClusterAddrs: []string{"a:1", ""}}, "empty address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.cfg.Options()
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Options() error = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}

	t.Run("a url gives a single-server client with the defaults and socket deadlines", func(t *testing.T) {
		o, err := redisstore.ClientConfig{URL: "redis://user:pw@10.0.0.5:6380/3"}.Options()
		if err != nil {
			t.Fatal(err)
		}
		if len(o.Addrs) != 1 || o.Addrs[0] != "10.0.0.5:6380" || o.Username != "user" || o.Password != "pw" || o.DB != 3 {
			t.Fatalf("options from the url: %+v", o)
		}
		if !o.ContextTimeoutEnabled {
			t.Fatalf("ContextTimeoutEnabled is off: the Limiter's deadline would not bound socket I/O")
		}
		if o.PoolSize <= 0 || o.DialTimeout != redisstore.DefaultDialTimeout || o.ReadTimeout != redisstore.DefaultReadTimeout || o.WriteTimeout != redisstore.DefaultWriteTimeout {
			t.Fatalf("defaults not applied: %+v", o)
		}
		if o.MaxRetries != -1 {
			t.Fatalf("MaxRetries = %d, want -1 (go-redis: no retries)", o.MaxRetries)
		}
		if o.IsClusterMode || o.MasterName != "" {
			t.Fatalf("a url gave a cluster or failover client: %+v", o)
		}
	})
	t.Run("cluster addresses give a cluster client even with one seed", func(t *testing.T) {
		o, err := redisstore.ClientConfig{ClusterAddrs: []string{"a:7000"}, PoolSize: 7, MaxRetries: 2}.Options()
		if err != nil {
			t.Fatal(err)
		}
		if !o.IsClusterMode || o.PoolSize != 7 || o.MaxRetries != 2 || !o.ContextTimeoutEnabled {
			t.Fatalf("cluster options: %+v", o)
		}
	})
	t.Run("sentinel addresses give a failover client for the master name", func(t *testing.T) {
		o, err := redisstore.ClientConfig{SentinelAddrs: []string{"s:26379"}, MasterName: "m", Password: "pw"}.Options()
		if err != nil {
			t.Fatal(err)
		}
		if o.MasterName != "m" || o.Password != "pw" || !o.ContextTimeoutEnabled {
			t.Fatalf("sentinel options: %+v", o)
		}
	})
}
