package config

import (
	"strings"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/httplimit"
	"github.com/rl-exporter/rl-exporter/limiter"
)

func TestCostFromEstimateAndReserveReachThePolicy(t *testing.T) {
	c, err := Parse("llm.yaml", []byte(`
default_class: chat
classes:
  chat:
    routes: ["POST /v1/chat/completions"]
    cost_from: {json: usage.total_tokens}
    estimate: {json: max_tokens, default: 500, min: 50, max: 4000}
    reserve: {hold: 2m, on_expiry: refund}
    limits:
      default: {algorithm: fixed_window, rate: 10000, period: 1m}
  embed:
    routes: ["POST /v1/embeddings"]
    cost_from: {header: X-Usage-Tokens}
    estimate: 300
    limits:
      default: {algorithm: token_bucket, rate: 10000, period: 1m}
`))
	if err != nil {
		t.Fatal(err)
	}
	pc, err := c.PolicyConfig(limiter.NewMemoryStore(limiter.MemoryConfig{}), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]httplimit.Class{}
	for _, cl := range pc.Classes {
		got[cl.Name] = cl
	}
	chat, embed := got["chat"], got["embed"]
	if chat.CostFrom != (httplimit.CostFrom{JSON: "usage.total_tokens"}) ||
		chat.Estimate != (httplimit.Estimate{JSON: "max_tokens", Default: 500, Min: 50, Max: 4000}) ||
		chat.Hold != 2*time.Minute || chat.OnExpiry != limiter.ExpireRefund {
		t.Errorf("chat %+v", chat)
	}
	if embed.CostFrom != (httplimit.CostFrom{Header: "X-Usage-Tokens"}) || embed.Estimate != (httplimit.Estimate{Default: 300}) ||
		embed.OnExpiry != limiter.ExpireCharge {
		t.Errorf("embed %+v", embed)
	}
}

func TestCostFromMistakesNameTheirKey(t *testing.T) {
	for _, tc := range []struct{ class, want string }{
		{`cost_from: {header: X-Usage, json: usage.total}`, "classes.c.cost_from: set exactly one of header, trailer or json, got 2"},
		{`cost_from: {}`, "classes.c.cost_from: set exactly one"},
		{`cost_from: {header: "bad header"}`, `classes.c.cost_from.header: "bad header" is not a header name`},
		{`estimate: 5`, "classes.c.estimate: is read only with cost_from"},
		{`{cost_from: {header: X-U}, estimate: {default: 0, json: max_tokens, max: -1}}`, "classes.c.estimate.max: must be >= 0"},
		{`{cost_from: {header: X-U}, estimate: 20000}`, "the quota 100 is below the class cost 20000"},
		{`{cost_from: {header: X-U}, reserve: {on_expiry: keep}}`, `classes.c.reserve.on_expiry: "keep": want charge or refund`},
		{`{cost_from: {header: X-U}, reserve: {hold: -1s}}`, "classes.c.reserve.hold: must be >= 0"},
		{`{cost_from: {header: X-U}, estimate: {default: 5, min: 10}}`, "classes.c.estimate.default: must be >= 10 (min)"},
		{`{cost_from: {header: X-U}, estimate: {default: 5, min: -1}}`, "classes.c.estimate.min: must be >= 0"},
		{`{cost_from: {header: X-U}, reserve: {hold: 2562047h}}`, "classes.c.reserve.hold: must be at most 24h"},
	} {
		body := tc.class
		if !strings.HasPrefix(body, "{") {
			body = "{" + body + "}"
		}
		_, err := Parse("bad.yaml", []byte("classes:\n  c: "+body[:len(body)-1]+", limits: {default: {algorithm: fixed_window, rate: 100, period: 1m}}}\n"))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.class, err, tc.want)
		}
	}
}
