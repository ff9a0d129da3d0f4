package config

import (
	"testing"
	"time"
)

const sharesRedis = "store: {type: redis, redis: {url: \"redis://127.0.0.1:1\"}}\n"

func TestSharesDefaultTheirInterval(t *testing.T) {
	c, err := Parse("rl.yaml", []byte(sharesRedis+
		"classes: {api: {shares: {enabled: true}, limits: {default: {algorithm: gcra, rate: 100, period: 1s}}}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Classes["api"].Shares; !got.Enabled || got.Interval != DefaultSharesInterval {
		t.Errorf("shares: %+v, want enabled with interval %s", got, DefaultSharesInterval)
	}
	c, err = Parse("rl.yaml", []byte(sharesRedis+
		"classes: {api: {shares: {enabled: true, interval: 250ms}, limits: {default: {algorithm: leaky_bucket, rate: 100, period: 1s, no_delay: true}}}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Classes["api"].Shares.Interval; got != 250*time.Millisecond {
		t.Errorf("shares.interval %s, want 250ms", got)
	}
}

func TestSharesRefusalsNameTheKey(t *testing.T) {
	limits := func(l string) string { return "limits: {default: " + l + "}" }
	gcra := limits("{algorithm: gcra, rate: 100, period: 1s}")
	checkParseErrors(t, []parseErrorCase{
		{"shares on the memory store", "classes: {api: {shares: {enabled: true}, " + gcra + "}}\n",
			[]string{"classes.api.shares", "store.type redis"}},
		{"an interval out of bounds", sharesRedis + "classes: {api: {shares: {enabled: true, interval: 20s}, " + gcra + "}}\n",
			[]string{"classes.api.shares.interval", "1ms to 10s"}},
		{"an interval without shares", sharesRedis + "classes: {api: {shares: {interval: 1s}, " + gcra + "}}\n",
			[]string{"classes.api.shares.interval", "enabled"}},
		{"a concurrency limit", sharesRedis + "classes: {api: {shares: {enabled: true}, " + limits("{algorithm: concurrency, limit: 10}") + "}}\n",
			[]string{"classes.api.limits.default.algorithm", "concurrency"}},
		{"a leaky bucket that delays", sharesRedis + "classes: {api: {shares: {enabled: true}, " + limits("{algorithm: leaky_bucket, rate: 10, period: 1s}") + "}}\n",
			[]string{"classes.api.limits.default.algorithm", "no_delay"}},
		{"a list of limits", sharesRedis + "classes: {api: {shares: {enabled: true}, " +
			limits("[{name: a, algorithm: gcra, rate: 10, period: 1s}, {name: b, algorithm: gcra, rate: 100, period: 1m}]") + "}}\n",
			[]string{"classes.api.limits.default", "list"}},
	})
}
