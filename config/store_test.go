package config

import (
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

func TestTheBreakerIsOnByDefaultAndFailPolicyLocalHasItsDefaults(t *testing.T) {
	c, err := Parse("rl.yaml", []byte("store: {type: redis, redis: {url: \"redis://127.0.0.1:1\"}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Store.Breaker; got.Threshold != 5 || got.Cooldown != time.Second {
		t.Errorf("store.breaker defaults: %+v, want threshold 5, cooldown 1s", got)
	}
	if got := c.Store.Local; got.MinInstances != 1 || got.HeartbeatInterval != time.Second || got.InstanceTTL != 5*time.Second || got.MaxKeys != limiter.DefaultLocalMaxKeys {
		t.Errorf("store.local defaults: %+v", got)
	}
	pc, err := c.PolicyConfig(limiter.NewMemoryStore(limiter.MemoryConfig{}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if pc.Breaker.Threshold != 5 || pc.Breaker.Cooldown != time.Second {
		t.Errorf("the policy's breaker is %+v, want the store.breaker section", pc.Breaker)
	}
	off, err := Parse("rl.yaml", []byte("store: {type: redis, redis: {url: \"redis://127.0.0.1:1\"}, breaker: {threshold: 0}}\n"))
	if err != nil {
		t.Fatalf("threshold 0 (breaker off) refused: %v", err)
	}
	if off.Store.Breaker.Threshold != 0 {
		t.Errorf("threshold 0 read as %d", off.Store.Breaker.Threshold)
	}
}

func TestInvalidStoreBreakerAndLocalKeysAreNamed(t *testing.T) {
	cases := []parseErrorCase{
		{"a negative breaker threshold", "store: {breaker: {threshold: -1}}\n", []string{"store.breaker.threshold", "0 disables"}},
		{"a zero cooldown with the breaker on", "store: {breaker: {cooldown: 0s}}\n", []string{"store.breaker.cooldown", "> 0"}},
		{"a cooldown without a unit", "store: {breaker: {cooldown: 5}}\n", []string{"store.breaker.cooldown", "without a unit"}},
		{"an unknown breaker key", "store: {breaker: {window: 1s}}\n", []string{"store.breaker", "window"}},
		{"no instance to divide by", "store: {local: {min_instances: 0}}\n", []string{"store.local.min_instances", ">= 1"}},
		{"a zero heartbeat interval", "store: {local: {heartbeat_interval: 0s}}\n", []string{"store.local.heartbeat_interval", "> 0"}},
		{"an instance TTL not longer than the heartbeat", "store: {local: {heartbeat_interval: 2s, instance_ttl: 2s}}\n", []string{"store.local.instance_ttl", "longer than store.local.heartbeat_interval"}},
		{"no key remembered", "store: {local: {max_keys: 0}}\n", []string{"store.local.max_keys", ">= 1"}},
	}
	checkParseErrors(t, cases)
}
