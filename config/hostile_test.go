package config

import (
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

func TestServerTimeoutsAndReadinessDefaults(t *testing.T) {
	s := Default().Server
	if s.ReadHeaderTimeout != 10*time.Second || s.ReadTimeout != 30*time.Second || s.IdleTimeout != 2*time.Minute || s.ReadyStrict {
		t.Errorf("read_header_timeout %s, read_timeout %s, idle_timeout %s, ready_strict %v; want 10s, 30s, 2m, false",
			s.ReadHeaderTimeout, s.ReadTimeout, s.IdleTimeout, s.ReadyStrict)
	}
	if s.MaxHeaderBytes != 64<<10 || s.MaxHeaderCount != 100 {
		t.Errorf("max_header_bytes %d, max_header_count %d; want 65536, 100", s.MaxHeaderBytes, s.MaxHeaderCount)
	}
}

func TestUnknownAPIKeysAreNotAnIdentityByDefault(t *testing.T) {
	c := Default()
	if !c.Identity.RequireKnownAPIKey {
		t.Fatal("identity.require_known_api_key defaults to false, want true")
	}
	pc, err := c.PolicyConfig(limiter.NewMemoryStore(limiter.MemoryConfig{}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if pc.Identity.AllowUnknownAPIKeys {
		t.Error("the default policy allows unknown API keys")
	}
}

func TestUserIDsAndAPIKeysAreLookedUpInTheirOwnLists(t *testing.T) {
	c, err := Parse("x.yaml", []byte(`
tiers:
  names: [free, pro]
  default: free
  keys: {pro: [alice]}
  api_keys: {free: [alice], pro: [k-pro]}
identity: {api_key_header: X-API-Key}
classes: {default: {limits: {free: {algorithm: fixed_window, rate: 5, period: 1m}}}}
`))
	if err != nil {
		t.Fatal(err)
	}
	pc, err := c.PolicyConfig(limiter.NewMemoryStore(limiter.MemoryConfig{}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := pc.Identity.TierByKey; len(got) != 1 || got["alice"] != "pro" {
		t.Errorf("user ids %v, want alice on pro only", got)
	}
	if got := pc.Identity.TierByAPIKey; len(got) != 2 || got["alice"] != "free" || got["k-pro"] != "pro" {
		t.Errorf("API keys %v, want alice on free and k-pro on pro", got)
	}
}

func TestHostileClientSettingsAreCheckedNamingTheKey(t *testing.T) {
	cases := []parseErrorCase{
		{"a sliding window whose reset time overflows",
			"classes: {default: {limits: {default: {algorithm: sliding_window, rate: 1, period: 2000000h}}}}\n",
			[]string{"classes.default.limits.default.period", "overflow"}},
		{"a token bucket that takes centuries to refill",
			"classes: {default: {limits: {default: {algorithm: token_bucket, rate: 1, period: 1h, burst: 1000000}}}}\n",
			[]string{"classes.default.limits.default.burst", "overflow"}},
		{"a zero read timeout", "server: {read_timeout: 0s}\n", []string{"server.read_timeout", "> 0"}},
		{"a zero idle timeout", "server: {idle_timeout: 0s}\n", []string{"server.idle_timeout", "> 0"}},
		{"a header timeout longer than the whole request's", "server: {read_header_timeout: 40s, read_timeout: 30s}\n",
			[]string{"server.read_header_timeout", "longer than server.read_timeout"}},
		{"a header byte bound below net/http's slack", "server: {max_header_bytes: 4096}\n", []string{"server.max_header_bytes", "8192 to", "got 4096"}},
		{"no header field allowed", "server: {max_header_count: 0}\n", []string{"server.max_header_count", "1 to 100000", "got 0"}},
		{"an API key header that could never identify anyone", "identity: {api_key_header: X-API-Key}\n",
			[]string{"identity.api_key_header", "tiers.api_keys", "require_known_api_key: false"}},
		{"an API key on an unknown tier", "tiers: {api_keys: {gold: [k]}}\n", []string{"tiers.api_keys.gold", "unknown tier"}},
		{"an API key on two tiers", "tiers: {names: [free, pro], default: free, api_keys: {free: [k], pro: [k]}}\nclasses: {default: {limits: {free: {algorithm: gcra, rate: 5, period: 1m}}}}\n",
			[]string{"tiers.api_keys.", "also listed under"}},
	}
	checkParseErrors(t, cases)
}

func TestAnAPIKeyHeaderIsValidWithKnownKeysOrWithUnknownKeysAllowed(t *testing.T) {
	for name, yaml := range map[string]string{
		"known keys listed":    "tiers: {api_keys: {default: [k1]}}\nidentity: {api_key_header: X-API-Key}\n",
		"unknown keys allowed": "identity: {api_key_header: X-API-Key, require_known_api_key: false}\n",
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := Parse("x.yaml", []byte(yaml)); err != nil {
				t.Error(err)
			}
		})
	}
}
