package config

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/rawbytes"
	"github.com/knadh/koanf/v2"
	"github.com/rl-exporter/rl-exporter/httplimit"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
)

func TestTheBuiltInDefaultsLimitEveryEndpointTo100PerMinute(t *testing.T) {
	c := Default()
	if c.Server.Listen != DefaultListen || c.Store.Type != "memory" || c.DefaultClass != "default" {
		t.Errorf("defaults %+v: want listen %s, memory store, default class", c, DefaultListen)
	}
	pc, err := c.PolicyConfig(limiter.NewMemoryStore(limiter.MemoryConfig{}), nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := httplimit.NewPolicy(pc)
	if err != nil {
		t.Fatal(err)
	}
	lims := p.Limits()
	if len(lims) != 1 || lims[0].Limit != limiter.PerMinute(limiter.FixedWindow, 100) || lims[0].Endpoint != httplimit.CatchAll {
		t.Errorf("limits %+v, want one: 100/min fixed_window on every endpoint", lims)
	}
	if pc.Headers != (httplimit.HeaderConfig{}) {
		t.Errorf("headers %+v: want X-RateLimit and RateLimit on, legacy and problem+json off", pc.Headers)
	}
}

func TestTheDemoConfigIsValid(t *testing.T) {
	c, err := Load("../examples/demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Classes) < 2 {
		t.Errorf("the demo has %d classes, want several", len(c.Classes))
	}
}

func TestAFileReplacesTheBuiltInClassAndKeepsScalarDefaults(t *testing.T) {
	c, err := Parse("x.yaml", []byte(`
tiers: {names: [free, pro], default: free}
classes:
  public:
    routes: ["GET /orders/{id}"]
    limits:
      free: {algorithm: token_bucket, rate: 10, period: 1s, burst: 20}
      pro: {algorithm: gcra, rate: 100, period: 1s}
`))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Classes["default"]; ok || c.DefaultClass != "public" {
		t.Errorf("classes %v default %q: want only public, and it the default", c.ClassNames(), c.DefaultClass)
	}
	if c.Store.Timeout != 100*time.Millisecond || !c.Headers.XRateLimit || c.Server.Listen != DefaultListen {
		t.Errorf("scalar defaults lost: %+v", c)
	}
	if got := c.Classes["public"].Limits["free"]; got.Burst != 20 || got.Period != time.Second {
		t.Errorf("free limit %+v", got)
	}
}

func TestInvalidConfigsNameTheFileTheKeyAndTheReason(t *testing.T) {
	dir := t.TempDir()
	short := filepath.Join(dir, "short.secret")
	if err := os.WriteFile(short, []byte("tiny"), 0o600); err != nil {
		t.Fatal(err)
	}
	badPEM := filepath.Join(dir, "bad.pem")
	if err := os.WriteFile(badPEM, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []parseErrorCase{
		{"an unknown top-level key", "listen: \":1\"\n", []string{"listen"}},
		{"an unknown nested key", "store: {timout: 1s}\n", []string{"timout"}},
		{"an unknown key in a limit", "classes: {default: {limits: {default: {algorithm: gcra, rate: 1, period: 1s, bust: 2}}}}\n", []string{"bust"}},
		{"a wrong type", "store: {timeout: soon}\n", []string{"store.timeout"}},
		{"a zero limit", "classes: {default: {limits: {default: {algorithm: fixed_window, rate: 0, period: 1m}}}}\n", []string{"classes.default.limits.default.rate", "must be > 0"}},
		{"a negative window", "classes: {default: {limits: {default: {algorithm: fixed_window, rate: 5, period: -1m}}}}\n", []string{"classes.default.limits.default.period"}},
		{"an unknown algorithm", "classes: {default: {limits: {default: {algorithm: magic, rate: 5, period: 1m}}}}\n", []string{"classes.default.limits.default.algorithm", "magic"}},
		{"a negative burst", "classes: {default: {limits: {default: {algorithm: gcra, rate: 5, period: 1m, burst: -1}}}}\n", []string{"burst"}},
		{"a malformed route", "classes: {default: {routes: [\"GET orders\"], limits: {default: {algorithm: gcra, rate: 5, period: 1m}}}}\n", []string{"classes.default.routes[0]", "GET orders"}},
		{"two classes claiming one route", "default_class: a\nclasses:\n  a: {routes: [/x], limits: {default: {algorithm: gcra, rate: 5, period: 1m}}}\n  b: {routes: [/x], limits: {default: {algorithm: gcra, rate: 5, period: 1m}}}\n", []string{"classes", "/x"}},
		{"an unparsable CIDR", "identity: {trusted_proxies: [10.0.0.0/33]}\n", []string{"identity.trusted_proxies[0]", "10.0.0.0/33"}},
		{"a limit for an unknown tier", "classes: {default: {limits: {default: {algorithm: gcra, rate: 5, period: 1m}, gold: {algorithm: gcra, rate: 5, period: 1m}}}}\n", []string{"classes.default.limits.gold", "unknown tier"}},
		{"a default tier outside the names", "tiers: {names: [free], default: pro}\n", []string{"tiers.default", "pro"}},
		{"several classes without a default", "classes:\n  a: {limits: {default: {algorithm: gcra, rate: 5, period: 1m}}}\n  b: {limits: {default: {algorithm: gcra, rate: 5, period: 1m}}}\n", []string{"default_class"}},
		{"an unknown store type", "store: {type: etcd}\n", []string{"store.type", "etcd"}},
		{"redis without an address", "store: {type: redis}\n", []string{"store.redis"}},
		{"an unknown fail policy", "store: {fail_policy: maybe}\n", []string{"store.fail_policy", "maybe"}},
		{"a listener without a port", "server: {listen: localhost}\n", []string{"server.listen"}},
		{"an upstream that is not a URL", "server: {upstream: \"ftp://x\"}\n", []string{"server.upstream"}},
		{"an unknown log format", "log: {format: xml}\n", []string{"log.format"}},
		{"an unsupported JWT algorithm", "identity: {jwt: {algorithm: none, secret_file: x}}\n", []string{"identity.jwt", "none"}},
		{"a short HMAC secret", "identity: {jwt: {algorithm: HS256, secret_file: short.secret}}\n", []string{"identity.jwt", "secret_file", "16"}},
		{"a public key file that is no key", "identity: {jwt: {algorithm: RS256, public_key_file: bad.pem}}\n", []string{"identity.jwt", "RS256"}},
		{"no descriptors allowed", "rls: {max_descriptors: 0}\n", []string{"rls.max_descriptors", ">= 1"}},
		{"no entries allowed", "rls: {max_entries: -1}\n", []string{"rls.max_entries", ">= 1"}},
		{"no override cache", "rls: {max_overrides: 0}\n", []string{"rls.max_overrides", ">= 1"}},
		{"no gRPC streams", "rls: {max_concurrent_streams: 0}\n", []string{"rls.max_concurrent_streams", "1 to"}},
		{"a zero keepalive min time", "rls: {keepalive_min_time: 0s}\n", []string{"rls.keepalive_min_time", "> 0"}},
		{"a zero connection idle time", "rls: {max_connection_idle: 0s}\n", []string{"rls.max_connection_idle", "> 0"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			file := filepath.Join(dir, "rl.yaml")
			_, err := Parse(file, []byte(c.yaml))
			if err == nil {
				t.Fatalf("no error for %q", c.yaml)
			}
			msg := err.Error()
			for _, w := range append([]string{file}, c.want...) {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not mention %q", msg, w)
				}
			}
		})
	}
}

func TestAMissingFileIsAnErrorNamingIt(t *testing.T) {
	_, err := Load("/nonexistent/rl.yaml")
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/rl.yaml") {
		t.Errorf("error %v, want one naming the file", err)
	}
}

func TestMoreInvalidConfigsNameTheFileTheKeyAndTheReason(t *testing.T) {
	cases := []parseErrorCase{
		{"a burst below the class cost", "classes: {default: {cost: 5, limits: {default: {algorithm: token_bucket, rate: 10, period: 1s, burst: 3}}}}\n", []string{"classes.default.limits.default.burst", "below the class cost 5"}},
		{"a window limit below the class cost", "classes: {default: {cost: 5, limits: {default: {algorithm: fixed_window, rate: 3, period: 1s}}}}\n", []string{"classes.default.limits.default.rate", "cost"}},
		{"a negative cost", "classes: {default: {cost: -1, limits: {default: {algorithm: fixed_window, rate: 3, period: 1s}}}}\n", []string{"classes.default.cost"}},
		{"a wrong type for a limit", "classes: {default: {limits: {default: {algorithm: gcra, rate: lots, period: 1s}}}}\n", []string{"classes.default.limits.default.rate"}},
		{"a wrong type for a list", "identity: {trusted_proxies: {a: b}}\n", []string{"identity.trusted_proxies"}},
		{"an unknown metrics key", "metrics: {cardinality: 5}\n", []string{"cardinality"}},
		{"a zero cardinality cap", "metrics: {max_label_sets: 0}\n", []string{"metrics.max_label_sets"}},
		{"an unknown trace exporter", "tracing: {exporter: zipkin}\n", []string{"tracing.exporter", "zipkin"}},
		{"a sample ratio above 1", "tracing: {sample_ratio: 2}\n", []string{"tracing.sample_ratio"}},
		{"a missing tokens file", "admin: {tokens_file: nope.tokens}\n", []string{"admin", "tokens_file", "nope.tokens"}},
		{"a refresh interval too short", "live: {refresh_interval: 1ms}\n", []string{"live.refresh_interval"}},
		{"a Redis password twice", "store: {type: redis, redis: {url: \"redis://127.0.0.1:1\", password: x, password_file: y}}\n", []string{"store.redis", "password"}},
		{"a Redis TLS CA file missing", "store: {type: redis, redis: {url: \"redis://127.0.0.1:1\", tls: {enabled: true, ca_file: nope.pem}}}\n", []string{"store.redis", "ca_file"}},
		{"a Redis TLS key without a cert", "store: {type: redis, redis: {url: \"redis://127.0.0.1:1\", tls: {enabled: true, key_file: k.pem}}}\n", []string{"store.redis", "cert_file"}},
		{"a negative pool size", "store: {type: redis, redis: {url: \"redis://127.0.0.1:1\", pool_size: -1}}\n", []string{"store.redis", "pool_size"}},
		{"a zero batch size", "store: {type: redis, redis: {url: \"redis://127.0.0.1:1\", batch: {max_size: 0}}}\n", []string{"store.redis.batch.max_size", "between 1 and 4096, got 0"}},
		{"too many batch senders", "store: {type: redis, redis: {url: \"redis://127.0.0.1:1\", batch: {senders: 65}}}\n", []string{"store.redis.batch.senders", "between 1 and 64, got 65"}},
		{"an unknown batch key", "store: {redis: {batch: {max_wait: 1ms}}}\n", []string{"store.redis.batch", "max_wait"}},
		{"an unparsable route pattern", "classes: {default: {routes: [\"GET /a/{x\"], limits: {default: {algorithm: gcra, rate: 5, period: 1m}}}}\n", []string{"classes.default.routes[0]"}},
		{"an unparsable CIDR in a list", "identity: {trusted_proxies: [10.0.0.0/8, not-a-cidr]}\n", []string{"identity.trusted_proxies[1]", "not-a-cidr"}},
		{"an unparsable trusted header peer", "identity: {trusted_header_peers: [127.0.0.1, nope]}\n", []string{"identity.trusted_header_peers[1]", "nope"}},
		{"an unparsable decision API peer", "server: {check_api: {allowed_peers: [\"::1/128\", 10.0.0.0/33]}}\n", []string{"server.check_api.allowed_peers[1]", "10.0.0.0/33"}},
		{"a decision API that no peer may call", "server: {check_api: {allowed_peers: []}}\n", []string{"server.check_api.allowed_peers", "enabled: false"}},
		{"a user header that no peer is trusted to send", "identity: {user_header: X-User-ID}\n", []string{"identity.user_header", "X-User-ID", "identity.trusted_header_peers, which is empty"}},
		{"a tier header trusted from the proxies alone", "tiers: {header: X-Plan-Tier}\nidentity: {trusted_proxies: [10.0.0.0/8]}\n", []string{"tiers.header", "X-Plan-Tier", "identity.trusted_header_peers, which is empty"}},
		{"a fractional rate", "classes: {default: {limits: {default: {algorithm: fixed_window, rate: 1.5, period: 1m}}}}\n", []string{"classes.default.limits.default.rate: 1.5 is not a whole number"}},
		{"a fractional cost", "classes: {default: {cost: 2.7, limits: {default: {algorithm: fixed_window, rate: 5, period: 1m}}}}\n", []string{"classes.default.cost: 2.7 is not a whole number"}},
		{"a rate beyond 64 bits", "classes: {default: {limits: {default: {algorithm: fixed_window, rate: 99999999999999999999999, period: 1m}}}}\n", []string{"classes.default.limits.default.rate: 1e+23 is out of range"}},
		{"a burst just beyond 64 bits", "classes: {default: {limits: {default: {algorithm: gcra, rate: 5, period: 1m, burst: 9223372036854775808}}}}\n", []string{"classes.default.limits.default.burst: 9223372036854775808 is out of range"}},
		{"a duration without a unit", "store: {timeout: 100}\n", []string{"store.timeout: 100 is a number without a unit"}},
		{"a period without a unit", "classes: {default: {limits: {default: {algorithm: fixed_window, rate: 5, period: 60}}}}\n", []string{"classes.default.limits.default.period: 60 is a number without a unit"}},
		{"a duration Go cannot parse shows the value", "reload: {interval: 9999999h}\n", []string{`reload.interval: "9999999h" is not a Go duration`}},
		{"an unknown top-level key is named as written", "listen: \":1\"\n", []string{": listen: unknown key"}},
		{"no idle upstream connection kept", "server: {upstream_transport: {max_idle_conns_per_host: 0}}\n", []string{"server.upstream_transport.max_idle_conns_per_host", "1 to 65536, got 0"}},
		{"a zero upstream dial timeout", "server: {upstream_transport: {dial_timeout: 0s}}\n", []string{"server.upstream_transport.dial_timeout", "> 0"}},
		{"a zero idle upstream connection timeout", "server: {upstream_transport: {idle_conn_timeout: 0s}}\n", []string{"server.upstream_transport.idle_conn_timeout", "> 0"}},
		{"a negative upstream response header timeout", "server: {upstream_transport: {response_header_timeout: -1s}}\n", []string{"server.upstream_transport.response_header_timeout", ">= 0"}},
		{"h2c to an https upstream", "server: {upstream: \"https://api.example\", upstream_transport: {h2c: true}}\n", []string{"server.upstream_transport.h2c", "http://"}},
		{"a client address header that is not a header name", "identity: {trusted_proxies: [10.0.0.0/8], client_ip_header: \"X Real IP\"}\n", []string{"identity.client_ip_header", `"X Real IP" is not a header name`}},
		{"an empty client address header", "identity: {trusted_proxies: [10.0.0.0/8], client_ip_header: \"\"}\n", []string{"identity.client_ip_header", `"" is not a header name`}},
		{"a client address header that no peer may send", "identity: {client_ip_header: X-Real-IP}\n", []string{"identity.client_ip_header", "X-Real-IP", "identity.trusted_proxies, which is empty"}},
		{"negative trusted hops", "identity: {trusted_proxies: [10.0.0.0/8], trusted_hops: -1}\n", []string{"identity.trusted_hops", "-1: must be 0"}},
		{"trusted hops of a one-address header", "identity: {trusted_proxies: [10.0.0.0/8], client_ip_header: X-Real-IP, trusted_hops: 1}\n", []string{"identity.trusted_hops", "holds one address"}},
		{"trusted hops without trusted proxies", "identity: {trusted_hops: 2}\n", []string{"identity.trusted_hops", "identity.trusted_proxies, which is empty"}},
		{"an IPv4 prefix too short", "identity: {ipv4_prefix: 8}\n", []string{"identity.ipv4_prefix", "8: must be 16 to 32"}},
		{"an IPv4 prefix too long", "identity: {ipv4_prefix: 33}\n", []string{"identity.ipv4_prefix", "33: must be 16 to 32"}},
		{"an IPv6 prefix of 0", "identity: {ipv6_prefix: 0}\n", []string{"identity.ipv6_prefix", "0: must be 32 to 128"}},
		{"an IPv6 prefix too long", "identity: {ipv6_prefix: 129}\n", []string{"identity.ipv6_prefix", "129: must be 32 to 128"}},
	}
	checkParseErrors(t, cases)
}

func TestEveryDecodeProblemIsItsOwnLineNamingTheFileAndKey(t *testing.T) {
	file := filepath.Join(t.TempDir(), "rl.yaml")
	_, err := Parse(file, []byte("store: {timout: 1s, timeout: soon}\nmetrics: {top_keys: abc}\nlisten: x\n"))
	if err == nil {
		t.Fatal("no error")
	}
	lines := strings.Split(err.Error(), "\n")
	want := []string{
		`store.timeout: "soon" is not a Go duration`,
		"store.timout: unknown key",
		"metrics.top_keys: expected type int",
		"listen: unknown key",
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d, one per problem:\n%s", len(lines), len(want), err)
	}
	for _, w := range want {
		found := false
		for _, l := range lines {
			if strings.HasPrefix(l, "config "+file+": ") && strings.Contains(l, w) {
				found = true
			}
		}
		if !found {
			t.Errorf("no line \"config %s: ...%s...\" in:\n%s", file, w, err)
		}
	}
	if strings.Contains(err.Error(), "config.Config") {
		t.Errorf("the error names a Go type:\n%s", err)
	}
}

func TestAFileThatIsNotYAMLKeysIsOneProblemOnOneLine(t *testing.T) {
	for name, content := range map[string]string{
		"a list":      "- a\n- b\n",
		"a scalar":    "hello\n",
		"a tab":       "server:\n\tlisten: x\n",
		"a key twice": "server: {listen: \":1\"}\nserver: {listen: \":2\"}\n",
	} {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "rl.yaml")
			_, err := Parse(file, []byte(content))
			if err == nil {
				t.Fatal("no error")
			}
			if msg := err.Error(); strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "config "+file+": yaml: ") {
				t.Errorf("error %q: want one line starting with the file", msg)
			}
		})
	}
}

func TestUserAndTierHeadersAreBelievedFromTheTrustedHeaderPeersAlone(t *testing.T) {
	c, err := Parse("rl.yaml", []byte(`
tiers: {names: [free, pro], default: free, header: X-Plan-Tier}
identity:
  user_header: X-User-ID
  trusted_proxies: [10.0.0.0/8]
  trusted_header_peers: [127.0.0.1, "192.168.7.0/24"]
classes:
  default:
    limits:
      free: {algorithm: fixed_window, rate: 5, period: 1m}
      pro: {algorithm: fixed_window, rate: 50, period: 1m}
`))
	if err != nil {
		t.Fatal(err)
	}
	pc, err := c.PolicyConfig(limiter.NewMemoryStore(limiter.MemoryConfig{}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(pc.Identity.TrustedHeaderPeers); got != "[127.0.0.1/32 192.168.7.0/24]" {
		t.Errorf("trusted header peers %s, want [127.0.0.1/32 192.168.7.0/24] (an address is its own /32)", got)
	}
	p, err := httplimit.NewPolicy(pc)
	if err != nil {
		t.Fatal(err)
	}
	m, err := httplimit.New(httplimit.Config{Policy: p})
	if err != nil {
		t.Fatal(err)
	}
	h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for _, tc := range []struct {
		name, remote, wantLimit string
	}{
		{"a listed address is believed", "127.0.0.1:5000", "50"},
		{"an address in a listed network is believed", "192.168.7.9:5000", "50"},
		{"a trusted proxy is not believed about the tier", "10.0.0.1:5000", "5"},
		{"any other peer is not believed", "203.0.113.7:5000", "5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = tc.remote
			r.Header.Set("X-User-ID", "alice")
			r.Header.Set("X-Plan-Tier", "pro")
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if got := w.Header().Get("X-RateLimit-Limit"); got != tc.wantLimit {
				t.Errorf("X-RateLimit-Limit %q, want %s", got, tc.wantLimit)
			}
		})
	}
}

func TestTheDecisionAPIIsForThisHostUnlessConfigured(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		enabled    bool
		peers      string
	}{
		{"by default it is on for the loopback addresses", "", true, "[127.0.0.0/8 ::1/128]"},
		{"a file's list replaces the default, an address being its own /32", "server: {check_api: {allowed_peers: [10.1.2.3, \"fd00::/8\"]}}\n", true, "[10.1.2.3/32 fd00::/8]"},
		{"it can be turned off, with or without a list", "server: {check_api: {enabled: false, allowed_peers: []}}\n", false, "[]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse("rl.yaml", []byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			peers, err := c.CheckAPIPeers()
			if err != nil {
				t.Fatal(err)
			}
			if c.Server.CheckAPI.Enabled != tc.enabled || fmt.Sprint(peers) != tc.peers {
				t.Errorf("enabled %v, allowed peers %v; want %v, %s", c.Server.CheckAPI.Enabled, peers, tc.enabled, tc.peers)
			}
		})
	}
}

func TestTheUpstreamTransportKeepsConnectionsForReuseByDefault(t *testing.T) {
	want := UpstreamTransport{MaxIdleConnsPerHost: 256, IdleConnTimeout: 90 * time.Second, DialTimeout: 5 * time.Second, ResponseHeaderTimeout: 60 * time.Second}
	if got := Default().Server.UpstreamTransport; got != want {
		t.Fatalf("default server.upstream_transport %+v, want %+v", got, want)
	}
	c, err := Parse(filepath.Join(t.TempDir(), "rl.yaml"), []byte("server: {upstream: \"http://127.0.0.1:1\", upstream_transport: {max_idle_conns_per_host: 1024, h2c: true, response_header_timeout: 0s}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	want.MaxIdleConnsPerHost, want.H2C, want.ResponseHeaderTimeout = 1024, true, 0
	if got := c.Server.UpstreamTransport; got != want {
		t.Fatalf("server.upstream_transport %+v, want %+v", got, want)
	}
}

func TestRedisBatchingIsOnByDefaultAndTheFileTunesIt(t *testing.T) {
	def := Default().RedisStoreConfig()
	if def.Batch != (redisstore.BatchConfig{MaxSize: redisstore.DefaultBatchMaxSize, Senders: redisstore.DefaultBatchSenders}) {
		t.Fatalf("default batching %+v, want on with %d decisions per call and %d senders", def.Batch, redisstore.DefaultBatchMaxSize, redisstore.DefaultBatchSenders)
	}
	c, err := Parse(filepath.Join(t.TempDir(), "rl.yaml"), []byte("store: {type: redis, redis: {url: \"redis://127.0.0.1:1\", prefix: app, batch: {disabled: true, max_size: 16, senders: 4}}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := redisstore.Config{Prefix: "app", Batch: redisstore.BatchConfig{Disabled: true, MaxSize: 16, Senders: 4}, ClusterRefreshMinInterval: redisstore.DefaultClusterRefreshMinInterval}
	if got := c.RedisStoreConfig(); got != want {
		t.Fatalf("RedisStoreConfig() = %+v, want %+v", got, want)
	}
}

func TestOnePassReportsEveryProblemOfAFileDecodingAndValidationAlike(t *testing.T) {
	file := filepath.Join(t.TempDir(), "rl.yaml")
	_, err := Parse(file, []byte(`
server: {listn: ":8080"}
classes:
  api:
    limits:
      default: {algorithm: gcrb, rate: -1, period: 0s}
  web:
    limits:
      default: {algorithm: gcra, rate: many, period: 1s}
`))
	if err == nil {
		t.Fatal("no error")
	}
	lines := strings.Split(err.Error(), "\n")
	want := []string{
		"server.listn: unknown key",
		`classes.api.limits.default.algorithm: unknown algorithm "gcrb"`,
		"classes.api.limits.default.rate: must be > 0, got -1",
		"classes.api.limits.default.period: must be > 0",
		"classes.web.limits.default.rate: expected type int64",
		// web is a class although its rate did not decode: two classes,
		// neither named default, and none chosen.
		"default_class: required when there are several classes",
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d, one per problem (a rate that is not a number is not also below 1):\n%s", len(lines), len(want), err)
	}
	for _, w := range want {
		if !slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, "config "+file+": ") && strings.Contains(l, w) }) {
			t.Errorf("no line \"config %s: ...%s...\" in:\n%s", file, w, err)
		}
	}
}

// parseErrorCase is a file that Parse must refuse, and what its error must name.
type parseErrorCase struct {
	name string
	yaml string
	want []string
}

// checkParseErrors parses each case's file and fails unless the error names
// the file and every one of the case's wants.
func checkParseErrors(t *testing.T, cases []parseErrorCase) {
	t.Helper()
	dir := t.TempDir()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			file := filepath.Join(dir, "rl.yaml")
			_, err := Parse(file, []byte(c.yaml))
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

func TestTheClientAddressSettingsReachThePolicy(t *testing.T) {
	build := func(t *testing.T, yaml string) http.Handler {
		t.Helper()
		c, err := Parse("rl.yaml", []byte(yaml))
		if err != nil {
			t.Fatal(err)
		}
		pc, err := c.PolicyConfig(limiter.NewMemoryStore(limiter.MemoryConfig{}), nil)
		if err != nil {
			t.Fatal(err)
		}
		p, err := httplimit.NewPolicy(pc)
		if err != nil {
			t.Fatal(err)
		}
		m, err := httplimit.New(httplimit.Config{Policy: p})
		if err != nil {
			t.Fatal(err)
		}
		return m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	}
	const limit = "classes: {default: {limits: {default: {algorithm: fixed_window, rate: 2, period: 1m}}}}\n"
	// statuses sends one request per header set from the trusted proxy.
	statuses := func(h http.Handler, hdrs ...map[string]string) string {
		var codes []int
		for _, hdr := range hdrs {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = "10.1.2.3:5000"
			for k, v := range hdr {
				r.Header.Set(k, v)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			codes = append(codes, w.Code)
		}
		return fmt.Sprint(codes)
	}
	xff := func(a string) map[string]string { return map[string]string{"X-Forwarded-For": a} }
	t.Run("by default X-Forwarded-For, IPv4 by address and IPv6 by /64", func(t *testing.T) {
		h := build(t, limit+"identity: {trusted_proxies: [10.0.0.0/8]}\n")
		if got := statuses(h, xff("198.51.100.1"), xff("198.51.100.2"), xff("198.51.100.3")); got != "[200 200 200]" {
			t.Errorf("three IPv4 addresses: %s, want [200 200 200]", got)
		}
		if got := statuses(h, xff("2001:db8::1"), xff("2001:db8::2"), xff("2001:db8::3")); got != "[200 200 429]" {
			t.Errorf("three addresses of one /64: %s, want [200 200 429]", got)
		}
	})
	t.Run("X-Real-IP, trusted hops and prefixes as configured", func(t *testing.T) {
		h := build(t, limit+"identity: {trusted_proxies: [10.0.0.0/8], client_ip_header: X-Real-IP, ipv4_prefix: 24, ipv6_prefix: 128}\n")
		real := func(a string) map[string]string {
			return map[string]string{"X-Real-IP": a, "X-Forwarded-For": "192.0.2.1"}
		}
		if got := statuses(h, real("198.51.100.1"), real("198.51.100.2"), real("198.51.100.3")); got != "[200 200 429]" {
			t.Errorf("three addresses of one /24 in X-Real-IP: %s, want [200 200 429]", got)
		}
		if got := statuses(h, real("2001:db8::1"), real("2001:db8::2"), real("2001:db8::3")); got != "[200 200 200]" {
			t.Errorf("three IPv6 addresses at /128: %s, want [200 200 200]", got)
		}
		h = build(t, limit+"identity: {trusted_proxies: [10.0.0.0/8], trusted_hops: 1}\n")
		if got := statuses(h, xff("198.51.100.1, 203.0.113.1"), xff("198.51.100.1, 203.0.113.2"), xff("198.51.100.1, 203.0.113.3")); got != "[200 200 429]" {
			t.Errorf("one client behind a CDN whose address changes: %s, want [200 200 429]", got)
		}
	})
}

func TestRedisDurabilityIsNoneByDefaultAndWaitIsBoundedAndNamed(t *testing.T) {
	if def := Default().RedisStoreConfig(); def.Durability != redisstore.DurabilityNone {
		t.Fatalf("default durability %v, want none", def.Durability)
	}
	file := filepath.Join(t.TempDir(), "rl.yaml")
	c, err := Parse(file, []byte("store: {type: redis, redis: {url: \"redis://127.0.0.1:1\", durability: wait, durability_timeout: 20ms}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.RedisStoreConfig(); got.Durability != redisstore.DurabilityWait || got.DurabilityTimeout != 20*time.Millisecond {
		t.Fatalf("RedisStoreConfig() = %+v, want durability wait for 20ms", got)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"{url: \"redis://127.0.0.1:1\", durability: always}", `store.redis.durability: must be none or wait, got "always"`},
		{"{url: \"redis://127.0.0.1:1\", durability: wait, durability_timeout: 0s}", "store.redis.durability_timeout: must be at least 1ms and below store.timeout"},
		{"{url: \"redis://127.0.0.1:1\", durability: wait, durability_timeout: 1s}", "store.redis.durability_timeout: must be at least 1ms and below store.timeout"},
		{"{cluster_addrs: [\"127.0.0.1:1\"], durability: wait}", "store.redis.durability: wait is not supported with store.redis.cluster_addrs"},
	} {
		_, err := Parse(file, []byte("store: {type: redis, redis: "+tc.yaml+"}\n"))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.yaml, err, tc.want)
		}
	}
}

func TestDefaultsYAMLHoldsEveryDefaultKeyAndNothingElse(t *testing.T) {
	out, err := DefaultsYAML()
	if err != nil {
		t.Fatal(err)
	}
	k := koanf.New(".")
	if err := k.Load(rawbytes.Provider(out), yaml.Parser()); err != nil {
		t.Fatal(err)
	}
	want := defaults()
	got := k.All()
	for key, v := range want {
		if fmt.Sprint(got[key]) != fmt.Sprint(v) {
			t.Errorf("%s: printed %v, want %v", key, got[key], v)
		}
	}
	for key := range got {
		if _, ok := want[key]; !ok {
			t.Errorf("%s printed, but it has no default", key)
		}
	}
	if len(want) < 60 {
		t.Errorf("%d default keys; the defaults lost some", len(want))
	}
	// Decoded alone, without the defaults beneath, the printed file is
	// the typed defaults.
	c, err := FromKoanf("defaults.yaml", k)
	if err != nil {
		t.Fatal(err)
	}
	d := Defaults()
	d.Classes, d.Tiers.Names, d.DefaultClass = c.Classes, c.Tiers.Names, c.DefaultClass // filled in, having no key default
	d.Source, d.dir, d.classesBuiltIn = c.Source, c.dir, c.classesBuiltIn
	if !reflect.DeepEqual(*c, d) {
		t.Errorf("the printed defaults decode as\n%+v\nwant\n%+v", *c, d)
	}
}
