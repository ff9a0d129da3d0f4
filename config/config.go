// Package config is rl-exporter's typed configuration: one Config struct
// loaded from YAML with koanf, on top of built-in defaults, strictly (an
// unknown key is an error) and validated with errors that name the file, the
// key and the reason.
//
// The package reads only the files it is given (the config file and the
// secret and key files it names); flags and the environment are read by
// cmd/rl-exporter, which applies them to the loaded Config.
package config

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/providers/rawbytes"
	"github.com/knadh/koanf/v2"

	"github.com/rl-exporter/rl-exporter/httplimit"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/overload"
)

// DefaultListen is the address of serve's main listener when none is
// configured: this host only, so that a first `serve` does not answer the
// network; ":8480" (--listen :8480) is every interface, as a container
// needs.
const DefaultListen = "127.0.0.1:8480"

// BuiltIn names the source of a Config loaded without a file.
const BuiltIn = "built-in defaults"

// Config is the whole configuration. It is a plain value, safe to read
// concurrently once loaded; a reload loads a new one.
type Config struct {
	// Server holds the listeners and the upstream.
	Server Server `koanf:"server"`
	// Log configures the structured logs.
	Log Log `koanf:"log"`
	// Store says where decisions are made.
	Store Store `koanf:"store"`
	// Tiers are the plan tiers.
	Tiers Tiers `koanf:"tiers"`
	// Identity says who is asking.
	Identity Identity `koanf:"identity"`
	// Headers selects the rate-limit header families and the 429 body.
	Headers Headers `koanf:"headers"`
	// Classes are the route classes by name.
	Classes map[string]Class `koanf:"classes"`
	// DefaultClass receives the requests no route matches. Default: the
	// only class, or the class named "default".
	DefaultClass string `koanf:"default_class"`
	// Metrics configures /metrics and the decision metrics.
	Metrics Metrics `koanf:"metrics"`
	// Tracing configures OpenTelemetry traces.
	Tracing Tracing `koanf:"tracing"`
	// Admin configures the admin API's bearer tokens.
	Admin Admin `koanf:"admin"`
	// Live configures the limits held in the store and changed without a deploy.
	Live Live `koanf:"live"`
	// Reload configures the hot reload of the config file.
	Reload Reload `koanf:"reload"`
	// RLS configures Envoy's rate limit service on server.grpc_listen.
	RLS RLS `koanf:"rls"`
	// RLQS configures Envoy's rate limit quota service on server.grpc_listen.
	RLQS RLQS `koanf:"rlqs"`
	// Region configures multi-region limits (see region.go).
	Region Region `koanf:"region"`

	// Source is the file the Config was loaded from, or BuiltIn.
	Source string `koanf:"-"`
	// Digest is the SHA-256 of the file content the Config was loaded
	// from (zero for the built-in defaults): the content a Watch of the
	// file starts from (WatchConfig.Since).
	Digest [32]byte `koanf:"-"`
	// dir resolves relative file names in the config.
	dir string
	// emptyFile: the file set no key (EmptyFile).
	emptyFile bool
	// classesBuiltIn: the file had no classes; the built-in class stands in.
	classesBuiltIn bool
}

// Server configures the listeners of `rl-exporter serve`.
type Server struct {
	// Listen is the main listener: the proxy, /v1/check and, unless
	// MetricsListen is set, /metrics, /healthz and /readyz. Default DefaultListen.
	Listen string `koanf:"listen"`
	// MetricsListen, when set, serves /metrics, /healthz and /readyz instead of Listen.
	MetricsListen string `koanf:"metrics_listen"`
	// AdminListen, when set, serves what shows users' keys. Off by default.
	AdminListen string `koanf:"admin_listen"`
	// AuthListen, when set, serves forward-auth (the decision API's auth path) alone, reading
	// heads up to AuthMaxHeaderBytes even where Listen proxies. Off by default.
	AuthListen string `koanf:"auth_listen"`
	// Upstream is the URL requests are proxied to; without it only the
	// decision API and the health endpoints are served.
	Upstream string `koanf:"upstream"`
	// ShutdownTimeout bounds the drain of in-flight requests on SIGTERM. Default 15s.
	ShutdownTimeout time.Duration `koanf:"shutdown_timeout"`
	// ReadyTimeout bounds the store ping of /readyz, and is how long its
	// answer is reused: however often /readyz is called, the store gets at
	// most one PING per ReadyTimeout. Default 1s.
	ReadyTimeout time.Duration `koanf:"ready_timeout"`
	// ReadyStrict makes /readyz fail (503) while the store is unreachable.
	// Default false: /readyz stays ready while store.fail_policy (open or
	// local) still decides, so a load balancer does not pull every instance
	// out during a store outage; with fail_policy closed it fails either way.
	ReadyStrict bool `koanf:"ready_strict"`
	// ReadHeaderTimeout bounds reading a request's headers. Default 10s;
	// at most ReadTimeout.
	ReadHeaderTimeout time.Duration `koanf:"read_header_timeout"`
	// ReadTimeout bounds reading a whole request, headers and body, on
	// every listener (the proxy and POST /v1/check included); a client
	// still sending when it expires is cut off and counted in
	// rate_limit_slow_clients_total. Raise it for large uploads over slow
	// links. Default 30s.
	ReadTimeout time.Duration `koanf:"read_timeout"`
	// IdleTimeout closes a keep-alive connection idle for this long.
	// Default 2m.
	IdleTimeout time.Duration `koanf:"idle_timeout"`
	// MaxHeaderBytes bounds a request's head (request line and header
	// fields) on every listener; a larger one gets 431. Default 64 KiB; at
	// least 8192.
	MaxHeaderBytes int `koanf:"max_header_bytes"`
	// MaxHeaderCount bounds the header field lines of a request, Host
	// included, on every listener; a request with more gets 431 before any
	// decision is made. Default 100.
	MaxHeaderCount int `koanf:"max_header_count"`
	// AuthMaxHeaderBytes bounds the head of a forward-auth request
	// (/v1/auth); past it, or past max_header_count, /v1/auth refuses the
	// request with the gateway's refusal status (X-Deny-Status, else 429)
	// and reason request_too_large, never 431. Without server.upstream the
	// main listener reads heads this large, its other paths still bounded
	// by max_header_bytes; with one, net/http stops every head at
	// max_header_bytes. Default 1 MiB; a value under max_header_bytes is
	// max_header_bytes.
	AuthMaxHeaderBytes int `koanf:"auth_max_header_bytes"`
	// CheckAPI says who may use the decision API, POST /v1/check.
	CheckAPI CheckAPI `koanf:"check_api"`
	// UpstreamTransport configures the proxy's connections to Upstream.
	UpstreamTransport UpstreamTransport `koanf:"upstream_transport"`
	// GRPCListen, when set, serves Envoy's rate limit service (gRPC) with
	// the descriptors of rls.config_dir. Off by default.
	GRPCListen string `koanf:"grpc_listen"`
	// GRPCTLS, when its files are set, serves GRPCListen over TLS.
	GRPCTLS GRPCTLS `koanf:"grpc_tls"`
	// Overload sheds requests to Upstream by priority once it is slower than
	// its latency objective (docs/overload.md). Off by default.
	Overload Overload `koanf:"overload"`
	// Paths says how every way in (the proxy, /v1/check, /v1/auth) reads
	// a request's path before choosing its class, so that the class is the
	// one of the path the upstream reads.
	Paths Paths `koanf:"paths"`
}

// Paths configures how a request's path is read (httplimit.Paths): dot
// segments are always resolved and repeated slashes merged; these settle
// what upstreams disagree on.
type Paths struct {
	// EscapedSlashes is what %2F or %5C in a path does: reject (the
	// default: 400 on the proxy, the deny status on /v1/auth), decode (to
	// '/', for matching and for the upstream) or keep (within its segment,
	// for an upstream that never decodes it).
	EscapedSlashes string `koanf:"escaped_slashes"`
	// Case is sensitive (the default) or insensitive, for an upstream
	// whose routes ignore case: matching only, the path goes on unchanged.
	Case string `koanf:"case"`
	// TrailingSlash is ignore (the default: /a/b/ matches what /a/b
	// matches, unless a route names /a/b/ itself) or strict.
	TrailingSlash string `koanf:"trailing_slash"`
}

// Overload configures the upstream's adaptive concurrency limit and the
// shedding by priority. Its tuning keys are package overload's Config
// (quantile, headroom, min_limit, max_limit, initial_limit, tolerance,
// smoothing, queue_size, long_window, window, min_samples,
// critical_reserve, critical_wait; defaults overload.Defaults), laid out
// in the block as they are; these fields are serve's.
type Overload struct {
	// Enabled turns the limit on. Default false.
	Enabled bool `koanf:"enabled"`
	// Config is the controller's tuning. Its Target is the latency
	// objective the limit holds the upstream's responses under, on
	// Quantile. Default: the upstream latency objective of SLOSpec, when
	// set; else none, and the latency baseline alone bounds the limit
	// (OverloadConfig reads it).
	overload.Config `koanf:",squash"`
	// SLOSpec is the SLO spec (slo.yaml) whose overload.latency_threshold
	// and overload.latency_quantile give Target and Quantile when Target is 0.
	SLOSpec string `koanf:"slo_spec"`
	// RetryAfter is the Retry-After of a shed request's 503. Default 1s.
	RetryAfter time.Duration `koanf:"retry_after"`
}

// UpstreamTransport configures the reverse proxy's connections to the
// upstream: kept alive and reused, so that a steady load opens no new
// connection per request.
type UpstreamTransport struct {
	// MaxIdleConnsPerHost is how many idle connections are kept for reuse;
	// at least the number of requests in flight at once. Default 256.
	MaxIdleConnsPerHost int `koanf:"max_idle_conns_per_host"`
	// IdleConnTimeout closes a connection idle for this long. Default 90s.
	IdleConnTimeout time.Duration `koanf:"idle_conn_timeout"`
	// DialTimeout bounds opening a connection. Default 5s.
	DialTimeout time.Duration `koanf:"dial_timeout"`
	// ResponseHeaderTimeout bounds the wait for the upstream's response
	// headers; past it the client gets 502. Default 60s; 0 means no bound.
	ResponseHeaderTimeout time.Duration `koanf:"response_header_timeout"`
	// H2C speaks HTTP/2 without TLS to an http:// upstream (which must
	// accept it). Default false: HTTP/1.1.
	H2C bool `koanf:"h2c"`
}

// CheckAPI configures the decision API, POST /v1/check. The API believes the
// key and plan tier in the body, so only the backend services that decide
// for their clients may reach it, never those clients. The forward-auth
// endpoint, /v1/auth, which believes forwarded headers, answers the same
// peers with the same tokens.
type CheckAPI struct {
	// Enabled serves the decision API and /v1/auth on the main listener.
	// False: the paths are proxied to the upstream like any other. Default true.
	Enabled bool `koanf:"enabled"`
	// AllowedPeers are the CIDRs (or single addresses) of the direct peers
	// allowed to call it; any other peer gets 403. Forwarded headers are
	// never consulted. Default: this host, [127.0.0.0/8, ::1/128]. A proxy
	// on a listed address (nginx terminating TLS on this host) lets every
	// one of its clients in: set Tokens then.
	AllowedPeers []string `koanf:"allowed_peers"`
	// TokensFile holds the decision API's bearer tokens, one per line:
	// "<name> <token>"; '#' starts a comment. With a token configured
	// (here or in Tokens) a request from an allowed peer must also carry
	// one (Authorization: Bearer), else 401. Default: none.
	TokensFile string `koanf:"tokens_file"`
	// Tokens are more tokens as "<name>:<token>", comma-separated; best
	// given as RL_SERVER__CHECK_API__TOKENS. Never logged.
	Tokens Secret `koanf:"tokens"`
	// Prefix is where every path of the decision API is served: check,
	// commit, release, usage and auth under it. Default /v1/; move it
	// ("/ratelimit/") when the upstream's own API is under /v1/.
	Prefix string `koanf:"prefix"`
}

// Log configures log/slog.
type Log struct {
	// Format is "text" (default) or "json".
	Format string `koanf:"format"`
	// Level is "debug", "info" (default), "warn" or "error".
	Level string `koanf:"level"`
}

// Store says where decisions are made.
type Store struct {
	// Type is "memory" (default, in process) or "redis".
	Type string `koanf:"type"`
	// Timeout bounds each decision's store call. Default 100ms.
	Timeout time.Duration `koanf:"timeout"`
	// FailPolicy is "open" (default), "closed" or "local".
	FailPolicy string `koanf:"fail_policy"`
	// Breaker stops calling a failing store for a while. On by default.
	Breaker StoreBreaker `koanf:"breaker"`
	// Local configures fail_policy local: how instances share the limit
	// while the store is down.
	Local StoreLocal `koanf:"local"`
	// Redis says how to reach Redis when Type is "redis".
	Redis Redis `koanf:"redis"`
}

// StoreBreaker configures the circuit breaker in front of the store
// (limiter.BreakerConfig): after Threshold consecutive failures decisions
// follow store.fail_policy at once, without calling the store, for
// Cooldown; then one call probes the store and a success closes it.
type StoreBreaker struct {
	// Threshold is the consecutive failures that open the circuit; 0
	// disables the breaker. Default 5.
	Threshold int `koanf:"threshold"`
	// Cooldown is how long the circuit stays open before a probe. Default 1s.
	Cooldown time.Duration `koanf:"cooldown"`
}

// StoreLocal configures fail_policy local (limiter.LocalConfig): while
// the store is up, each instance announces itself in it with a heartbeat
// and learns how many are live; while it is down, each instance enforces
// the limit divided by the last count it knew.
type StoreLocal struct {
	// MinInstances is the smallest count a limit is divided by, used when
	// the count was never known (the store was down from the start).
	// Default 1.
	MinInstances int `koanf:"min_instances"`
	// HeartbeatInterval is how often an instance announces itself. Default 1s.
	HeartbeatInterval time.Duration `koanf:"heartbeat_interval"`
	// InstanceTTL is how long an instance counts as live after its last
	// heartbeat; more than HeartbeatInterval. Default 5s.
	InstanceTTL time.Duration `koanf:"instance_ttl"`
	// MaxKeys bounds the keys whose last store decision is remembered, so
	// that a key keeps its spent budget when the store fails. Default 100000.
	MaxKeys int `koanf:"max_keys"`
}

// Redis locates Redis: exactly one of URL, ClusterAddrs or SentinelAddrs
// (with SentinelMaster).
type Redis struct {
	// URL reaches a single Redis (redis:// or rediss://). Exactly one of
	// URL, ClusterAddrs and SentinelAddrs is set.
	URL string `koanf:"url"`
	// ClusterAddrs are seed nodes of a Redis Cluster.
	ClusterAddrs []string `koanf:"cluster_addrs"`
	// SentinelAddrs are Sentinel addresses; SentinelMaster names the master.
	SentinelAddrs  []string `koanf:"sentinel_addrs"`
	SentinelMaster string   `koanf:"sentinel_master"`
	// Username authenticates with Redis ACLs (with the password).
	Username string `koanf:"username"`
	// Password authenticates to Redis; best given as RL_STORE__REDIS__PASSWORD
	// or through PasswordFile. Never logged.
	Password Secret `koanf:"password"`
	// PasswordFile holds the Redis password (never logged).
	PasswordFile string `koanf:"password_file"`
	// PoolSize is the connections per node; default 10 × GOMAXPROCS.
	PoolSize int `koanf:"pool_size"`
	// DialTimeout bounds connecting to Redis. Default 1s.
	DialTimeout time.Duration `koanf:"dial_timeout"`
	// DialAttempts is how many times a connection is dialled before the
	// call fails, 1 to MaxRedisDialAttempts; all of them within the
	// decision's store.timeout. Default 1: a refused connection fails the
	// decision at once, as an error, not at its deadline as a timeout.
	DialAttempts int `koanf:"dial_attempts"`
	// Prefix is the first component of every Redis key; default "rl".
	Prefix string `koanf:"prefix"`
	// TLS configures TLS to Redis (a rediss:// URL turns it on too).
	TLS RedisTLS `koanf:"tls"`
	// Batch says how concurrent decisions share script calls. On by default.
	Batch RedisBatch `koanf:"batch"`
	// Cluster says how a Redis Cluster's slot map is followed (with
	// cluster_addrs only).
	Cluster RedisCluster `koanf:"cluster"`
	// Durability is what a decision waits for before it is answered:
	// "none" (the primary ran its script; Redis replicates
	// asynchronously, so a failover can lose the last writes) or "wait"
	// (WAIT 1 DurabilityTimeout after each script call: one replica holds
	// the write, or the timeout passed). "wait" is for url or
	// sentinel_addrs, not cluster_addrs. Default "none".
	Durability string `koanf:"durability"`
	// DurabilityTimeout bounds the wait of durability "wait"; a write no
	// replica acknowledged by then still counts. > 0 and below
	// store.timeout; default 50ms.
	DurabilityTimeout time.Duration `koanf:"durability_timeout"`
}

// RedisCluster configures how the Redis store follows a Cluster's slot
// map: which master holds which slots, which changes when a replica is
// promoted or slots move.
type RedisCluster struct {
	// RefreshMinInterval is the shortest time between two reloads of the
	// slot map asked for by failed calls (a node refused, broke or did not
	// answer the connection; CLUSTERDOWN, MOVED, READONLY ...), which is how
	// decisions find a promoted replica within moments. > 0; default 100ms.
	RefreshMinInterval time.Duration `koanf:"refresh_min_interval"`
	// ReloadInterval is how often the slot map is reloaded when nothing
	// asked for it earlier. > 0; default 60s.
	ReloadInterval time.Duration `koanf:"reload_interval"`
	// MaxRedirects is how many MOVED or ASK redirections a call follows
	// (while slots move), 0 to MaxRedisClusterRedirects. Default 3. A call
	// is never sent again after a network error: a decision is not
	// idempotent.
	MaxRedirects int `koanf:"max_redirects"`
}

// Bounds of store.redis.dial_attempts and store.redis.cluster.max_redirects.
const (
	MaxRedisDialAttempts     = 10
	MaxRedisClusterRedirects = 16
)

// RedisBatch configures how the Redis store groups concurrent decisions
// into shared script calls (redisstore.BatchConfig): a decision made alone
// is sent at once; those that arrive while others are on their way go
// together, each still atomic and answered on its own.
type RedisBatch struct {
	// Disabled makes every decision its own script call. Default false.
	Disabled bool `koanf:"disabled"`
	// MaxSize caps the decisions in one script call, 1 to MaxRedisBatchSize.
	// Default redisstore.DefaultBatchMaxSize (128).
	MaxSize int `koanf:"max_size"`
	// Senders is the number of batches on their way to Redis at once, 1 to
	// MaxRedisBatchSenders. Default redisstore.DefaultBatchSenders (2).
	Senders int `koanf:"senders"`
}

// Bounds of store.redis.batch: the store keeps a queue of 4 × MaxSize ×
// Senders decisions, so the product is capped.
const (
	MaxRedisBatchSize    = 4096
	MaxRedisBatchSenders = 64
)

// RedisTLS configures TLS connections to Redis.
type RedisTLS struct {
	// Enabled turns TLS on for every connection.
	Enabled bool `koanf:"enabled"`
	// CAFile holds the PEM CA certificates to verify the server with.
	// Default: the system's.
	CAFile string `koanf:"ca_file"`
	// CertFile and KeyFile hold a PEM client certificate and key (mutual TLS).
	CertFile string `koanf:"cert_file"`
	KeyFile  string `koanf:"key_file"`
	// ServerName overrides the name checked in the server's certificate.
	ServerName string `koanf:"server_name"`
	// InsecureSkipVerify skips verifying the server's certificate (tests only).
	InsecureSkipVerify bool `koanf:"insecure_skip_verify"`
}

// Metrics configures /metrics and the decision metrics.
type Metrics struct {
	// MaxLabelSets caps the (endpoint, plan_tier) label sets; the endpoints
	// beyond it are counted as "other". Default 1000.
	MaxLabelSets int `koanf:"max_label_sets"`
	// NativeHistograms adds native histograms beside the classic buckets.
	NativeHistograms bool `koanf:"native_histograms"`
	// Exemplars attaches trace ids to store-duration observations when
	// tracing is on; false keeps them out even then. Default true.
	Exemplars bool `koanf:"exemplars"`
	// NearLimitShare: an allowed decision with less than this share of the
	// quota left counts as near the limit. Default 0.2.
	NearLimitShare float64 `koanf:"near_limit_share"`
	// TopKeys is how many top-limited keys are tracked. Default 100.
	TopKeys int `koanf:"top_keys"`
	// TopWindow is the length of one top-limited window. Default 10m.
	TopWindow time.Duration `koanf:"top_window"`
	// WebConfigFile is an exporter-toolkit web config (TLS, basic auth) for /metrics.
	WebConfigFile string `koanf:"web_config_file"`
}

// Tracing configures OpenTelemetry traces.
type Tracing struct {
	// Exporter is none (default), stdout, otlp-grpc or otlp-http.
	Exporter string `koanf:"exporter"`
	// Endpoint is the OTLP collector (host:port or URL).
	Endpoint string `koanf:"endpoint"`
	// Insecure sends OTLP without TLS.
	Insecure bool `koanf:"insecure"`
	// SampleRatio is the share of new traces sampled, in [0, 1]. Default 1.
	SampleRatio float64 `koanf:"sample_ratio"`
	// ServiceName names this process in traces. Default rl-exporter.
	ServiceName string `koanf:"service_name"`
	// Headers are sent with every OTLP export.
	Headers map[string]string `koanf:"headers"`
}

// Admin configures the admin API's bearer tokens. Without any token the
// admin API does not start.
type Admin struct {
	// TokensFile holds one token per line: "<name> <role> <token>", role
	// read-only or read-write; '#' starts a comment.
	TokensFile string `koanf:"tokens_file"`
	// Tokens are more tokens as "<name>:<role>:<token>", comma-separated;
	// best given as RL_ADMIN__TOKENS. Never logged.
	Tokens Secret `koanf:"tokens"`
}

// Live configures the limits held in the store (Redis hashes
// <prefix>:config:<tier> and <prefix>:config:<class>:<tier>).
type Live struct {
	// Enabled reads live limits from the store. Default true.
	Enabled bool `koanf:"enabled"`
	// RefreshInterval is the period of the full re-read that backs up the
	// pub/sub notifications. Default 10s.
	RefreshInterval time.Duration `koanf:"refresh_interval"`
}

// Reload configures the hot reload of the config file.
type Reload struct {
	// Watch reloads the file when it changes. Default true.
	Watch bool `koanf:"watch"`
	// Interval is the period of the content check that backs up file
	// notifications (network file systems, a file removed and re-created).
	// Default 5s.
	Interval time.Duration `koanf:"interval"`
}

// Secret is a string that never shows in logs or formatted output: String,
// LogValue and MarshalJSON print "[redacted]". Reveal returns the value.
type Secret string

// Reveal returns the secret itself.
func (s Secret) Reveal() string { return string(s) }

// String returns "[redacted]" (or "" when empty).
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return "[redacted]"
}

// LogValue keeps the secret out of slog output.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalJSON keeps the secret out of JSON output.
func (s Secret) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// GoString keeps the secret out of %#v output.
func (s Secret) GoString() string { return strconv.Quote(s.String()) }

// Tiers are the plan tiers.
type Tiers struct {
	// Names lists the tiers. Default: just Default.
	Names []string `koanf:"names"`
	// Default is the tier of clients whose tier is unknown. Default "default".
	Default string `koanf:"default"`
	// Header names a header carrying the tier (X-Plan-Tier), believed only
	// from identity.trusted_header_peers.
	Header string `koanf:"header"`
	// Keys lists, per tier, the user ids and JWT subjects on it.
	Keys map[string][]string `koanf:"keys"`
	// APIKeys lists, per tier, the API keys on it: the known API keys. An
	// API key is looked up here only, never in Keys, so a key that equals a
	// user id never gets that user's tier.
	APIKeys map[string][]string `koanf:"api_keys"`
}

// Identity says how clients are identified.
type Identity struct {
	// TrustedProxies are CIDRs whose ClientIPHeader is believed.
	TrustedProxies []string `koanf:"trusted_proxies"`
	// ClientIPHeader is the one header the client's address is read from,
	// and only from TrustedProxies: X-Forwarded-For (default, walked from
	// the right), Forwarded (its for= parameters, walked the same way; for
	// proxies that append to it), or a header holding one address that
	// the proxy overwrites (X-Real-IP, CF-Connecting-IP). A value that is
	// no address keys the request by its direct peer.
	ClientIPHeader string `koanf:"client_ip_header"`
	// TrustedHops, above 0, counts the proxies in front of the direct peer
	// instead of matching their addresses (Envoy's xff_num_trusted_hops):
	// the client is the (N+1)th address from the right. Default 0: walk
	// past every address in TrustedProxies.
	TrustedHops int `koanf:"trusted_hops"`
	// IPv4Prefix and IPv6Prefix are the leading bits of an address that
	// key a client: every address of one such network shares one budget.
	// Defaults 32 (one address) and 64 (one IPv6 subnet, whose addresses
	// the client picks itself); at least 16 and 32.
	IPv4Prefix int `koanf:"ipv4_prefix"`
	IPv6Prefix int `koanf:"ipv6_prefix"`
	// TrustedHeaderPeers are CIDRs whose UserHeader and tiers.header are
	// believed: the gateways that overwrite those headers. Required when
	// either header is set; not defaulted to TrustedProxies, since a proxy
	// that appends X-Forwarded-For passes other headers through.
	TrustedHeaderPeers []string `koanf:"trusted_header_peers"`
	// UserHeader names a header carrying the user id (X-User-ID), believed
	// only from TrustedHeaderPeers.
	UserHeader string `koanf:"user_header"`
	// APIKeyHeader names the headers carrying an API key (X-API-Key), one
	// name or a list: the first a request carries is its key. From
	// Authorization the key is the token after one of APIKeySchemes.
	APIKeyHeader []string `koanf:"api_key_header"`
	// APIKeySchemes are the Authorization schemes whose token is an API
	// key, any case; default [Bearer]. Basic: the user name, or the
	// password when the user name is empty.
	APIKeySchemes []string `koanf:"api_key_schemes"`
	// UnusableAPIKey says what becomes of a request whose key header is
	// present but names no known client (an unknown scheme or key, a
	// malformed credential): "address" (default) keys it by its client
	// address, "refuse" answers 401. Either way it is counted in
	// rate_limit_identity_fallbacks_total and logged once per interval.
	UnusableAPIKey string `koanf:"unusable_api_key"`
	// RequireKnownAPIKey ignores API keys not listed under tiers.api_keys:
	// such a request is keyed by its client address, so a client cannot
	// escape its limit by rotating keys. Default true; false makes every
	// API key a budget of its own.
	RequireKnownAPIKey bool `koanf:"require_known_api_key"`
	// JWT verifies bearer tokens when Algorithm is set.
	JWT JWT `koanf:"jwt"`
}

// JWT configures bearer-token verification.
type JWT struct {
	// Algorithm is the only one accepted (HS256, RS256, ES256, ...); empty disables JWT.
	Algorithm string `koanf:"algorithm"`
	// Header carries the token; default Authorization (Bearer).
	Header string `koanf:"header"`
	// SecretFile holds the HMAC secret (HS*).
	SecretFile string `koanf:"secret_file"`
	// PublicKeyFile holds the PEM public key (RS*, ES*).
	PublicKeyFile string `koanf:"public_key_file"`
	// Issuer and Audience, when set, must match.
	Issuer   string `koanf:"issuer"`
	Audience string `koanf:"audience"`
	// Leeway tolerates clock skew.
	Leeway time.Duration `koanf:"leeway"`
}

// Headers selects the header families and the 429 body.
type Headers struct {
	// XRateLimit sends X-RateLimit-Limit/-Remaining/-Reset. Default true.
	XRateLimit bool `koanf:"x_ratelimit"`
	// RateLimit sends the IETF draft-10 RateLimit-Policy and RateLimit fields. Default true.
	RateLimit bool `koanf:"ratelimit"`
	// Legacy sends RateLimit-Limit/-Remaining/-Reset. Default false.
	Legacy bool `koanf:"legacy"`
	// ProblemJSON makes 429 bodies application/problem+json. Default false.
	ProblemJSON bool `koanf:"problem_json"`
}

// Class is a route class.
type Class struct {
	// Routes are ServeMux patterns ("GET /orders/{id}").
	Routes []string `koanf:"routes"`
	// Shadow decides and records but never rejects.
	Shadow bool `koanf:"shadow"`
	// Shared gives the whole class one budget per client instead of one per endpoint.
	Shared bool `koanf:"shared"`
	// Cost is the units each request takes. Default 1; every limit's quota
	// (burst, or rate for the window algorithms) must be at least Cost.
	Cost int64 `koanf:"cost"`
	// Limits is the limit per tier; the default tier is required. A tier's
	// value is one limit, or a list of named limits decided as one
	// (Limit.List).
	Limits map[string]Limit `koanf:"limits"`
	// RegionMode is how the class's limits are shared across regions:
	// local (default), strict, async or hybrid (docs/multi-region.md).
	// A tier's region_mode overrides it.
	RegionMode string `koanf:"region_mode"`
	// HybridThreshold is, for region_mode hybrid, the share of the limit
	// below which a key is decided asynchronously; strictly between 0 and
	// 1. Default DefaultHybridThreshold (nil: not set).
	HybridThreshold *float64 `koanf:"hybrid_threshold"`
	// Priority is the class's requests' priority when server.overload
	// sheds: critical, default or sheddable. Default "default". A tier's
	// priority overrides it.
	Priority string `koanf:"priority"`
	// Penalty, when After is set, refuses a client refused After times
	// within Within for For (status penalized). Off by default.
	Penalty Penalty `koanf:"penalty"`
	// CostFrom reads each request's real cost from its response: the
	// estimate is reserved at admission and settled at the real cost when
	// the response ends (docs/cost-and-quotas.md). nil: Cost at admission.
	CostFrom *CostFrom `koanf:"cost_from"`
	// Estimate is what a request of a class with cost_from reserves: a
	// number, or {json: max_tokens | header: X-Max-Tokens, default: N,
	// min: L, max: M}. Default: Cost.
	Estimate *Estimate `koanf:"estimate"`
	// Reserve says how long a reservation is held and what its expiry does.
	Reserve Reserve `koanf:"reserve"`
	// Shares, when enabled, decides every limit of the class from a local
	// share reserved from Redis, with no round trip per decision
	// (docs/redis-store.md). Off by default.
	Shares Shares `koanf:"shares"`
}

// Shares configures a class's local shares (package limiter/shares).
type Shares struct {
	// Enabled turns shares on; they need store.type redis.
	Enabled bool `koanf:"enabled"`
	// Interval is how long a share's chunk is used before its unused units
	// go back, and how often an idle key's go back. Default
	// DefaultSharesInterval when enabled.
	Interval time.Duration `koanf:"interval"`
}

// DefaultSharesInterval is shares.interval's default.
const DefaultSharesInterval = 100 * time.Millisecond

// MaxSharesInterval bounds shares.interval: a unit may be used an interval
// after it was taken, and held unused by one replica as long.
const MaxSharesInterval = 10 * time.Second

// Penalty is a class's penalty box: limiter.Penalty's keys (after,
// within, for). Within defaults to the period of the class's limit for the
// default tier, the window its refusals are counted in; the struct
// remembers whether it took that default.
type Penalty struct {
	limiter.Penalty `koanf:",squash"`
	// withinDefault: the file left within unset and fill set it.
	withinDefault bool
}

// WithinIsDefault reports whether Within is the default, the period of
// the class's default-tier limit, because the file does not set it.
func (p Penalty) WithinIsDefault() bool { return p.withinDefault }

// CostFrom names where a response carries its cost: exactly one of a
// header, a trailer, or a gjson path into the JSON body (also read in the
// last data event of a text/event-stream response that has it). The file's
// shape is httplimit's, keys and all.
type CostFrom = httplimit.CostFrom

// Estimate is what a request reserves at admission: what it says in a
// member of its JSON body or a header (given twice, the largest), at
// least Min (default 1) and capped at Max (default: the quota), else
// Default. The file's shape is httplimit's, keys and all, or a number
// (estimateFromNumber).
type Estimate = httplimit.Estimate

// Reserve configures a class's reservations.
type Reserve struct {
	// Hold is how long a reservation waits to be settled. Default 5m.
	Hold time.Duration `koanf:"hold"`
	// OnExpiry is charge (the default: the estimate stays spent) or refund.
	OnExpiry string `koanf:"on_expiry"`
}

// Limit is one limit. For fixed_window, sliding_log and sliding_window, Rate
// requests per Period (the window). For token_bucket, leaky_bucket and gcra,
// a bucket of Burst (default Rate) refilled at Rate per Period.
type Limit struct {
	// Algorithm is one of fixed_window, sliding_log, sliding_window,
	// token_bucket, leaky_bucket or gcra, or concurrency (limit, lease_ttl).
	Algorithm string `koanf:"algorithm"`
	// Rate is the requests admitted per Period; at least the class cost.
	Rate int64 `koanf:"rate"`
	// Period is the window, or the refill period of a bucket.
	Period time.Duration `koanf:"period"`
	// Burst is the bucket size of the bucket algorithms; default Rate.
	Burst int64 `koanf:"burst"`
	// NoDelay makes leaky_bucket admit at once instead of holding the
	// request for its delay, still counting it in the bucket.
	NoDelay bool `koanf:"no_delay"`
	// AlignWindows starts fixed_window and sliding_window windows on
	// multiples of Period for every client, instead of at a per-key offset.
	AlignWindows bool `koanf:"align_windows"`
	// RegionMode overrides the class's region_mode for this tier.
	RegionMode string `koanf:"region_mode"`
	// Calendar places the windows of a period of day, week, month or year
	// (fixed_window): set by such a period, with the file's calendar keys.
	Calendar *Calendar `koanf:"calendar"`
	// Priority overrides the class's priority for this tier.
	Priority string `koanf:"priority"`
	// Limit is, for algorithm concurrency, the requests a key may have in
	// flight at once; rate, period and burst are then not set.
	Limit int64 `koanf:"limit"`
	// LeaseTTL is, for algorithm concurrency, how long a lease never
	// returned (a crashed instance) holds its slot. Default DefaultLeaseTTL.
	LeaseTTL time.Duration `koanf:"lease_ttl"`
	// List holds the limits of a tier whose value in the file is a list
	// (tierLists): every one of them must admit a request. The other
	// fields are then unset; nil for a tier of one limit.
	List []NamedLimit `koanf:"list" derived:"a list"`
}

// Default returns the built-in configuration: one class, "default", that
// limits every endpoint per client to 100 requests per minute.
func Default() *Config {
	c, err := Parse(BuiltIn, nil)
	if err != nil {
		panic("config: built-in defaults are invalid: " + err.Error()) // a bug, caught by the tests
	}
	return c
}

// Load reads and validates the YAML file at path.
func Load(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return Parse(path, b)
}

// Parse validates YAML data from the file named name (used in errors and to
// resolve relative file names). Nil data means the built-in defaults.
func Parse(name string, data []byte) (*Config, error) {
	k, err := NewKoanf(name, data)
	if err != nil {
		return nil, err
	}
	c, err := FromKoanf(name, k)
	if err != nil {
		return nil, err
	}
	if data != nil {
		c.Digest = sha256.Sum256(data)
	}
	return c, nil
}

// NewKoanf returns a koanf instance holding the defaults and, over them, the
// YAML data of the file named name. Further layers (environment, flags) can
// be loaded into it before FromKoanf.
func NewKoanf(name string, data []byte) (*koanf.Koanf, error) {
	k := koanf.New(".")
	if err := k.Load(confmap.Provider(defaults(), "."), nil); err != nil {
		return nil, fmt.Errorf("config defaults: %w", err)
	}
	if len(data) > 0 {
		if err := k.Load(rawbytes.Provider(data), yaml.Parser()); err != nil {
			return nil, fmt.Errorf("config %s: %s", name, oneLine(err.Error()))
		}
	}
	return k, nil
}

// FromKoanf decodes k strictly into a Config, fills the defaults and
// validates it. Every problem of the file is reported at once, as
// Problems: a block out of place, unknown keys, values that do not
// decode, and what validation finds in everything that did.
func FromKoanf(name string, k *koanf.Koanf) (*Config, error) {
	found, k := misplacedBlocks(name, k)
	found = append(found, unknownKeys(name, k.Raw(), reflect.TypeOf(Config{}))...)
	c, undecoded := decode(name, k)
	for _, p := range undecoded {
		// A key the file may not set at all (an entry's list) is told
		// once, as unknown.
		if !slices.ContainsFunc(found, func(f *FieldError) bool { return f.Key == p.Key }) {
			found = append(found, p)
		}
	}
	c.Source = name
	if name != BuiltIn {
		c.dir = filepath.Dir(name)
	}
	c.classesBuiltIn = len(c.Classes) == 0
	c.fill()
	if err := mergeProblems(found, c.problems()).sorted().err(); err != nil {
		return nil, err
	}
	return &c, nil
}

// decode decodes k into a Config and returns the problems of the values
// that did not decode. The decoder drops the whole map entry around a
// value it cannot convert (a class whose one period is "1 minute"), so
// such values are taken out of a copy of k and the rest decoded again:
// what decoded is then validated as a whole, and one pass reports every
// problem of the file.
func decode(name string, k *koanf.Koanf) (Config, Problems) {
	var reported Problems
	for attempt := 0; ; attempt++ {
		var c Config
		err := k.UnmarshalWithConf("", &c, koanf.UnmarshalConf{DecoderConfig: &mapstructure.DecoderConfig{
			DecodeHook: mapstructure.ComposeDecodeHookFunc(
				tierLists,
				scopeWords,
				calendarPeriods,
				strictNumbers,
				estimateFromNumber,
				mapstructure.StringToSliceHookFunc(","),
			),
			// Unknown keys are found by unknownKeys, from the struct tags.
			// Keys match exactly: "Classes" is an unknown key, as "Server" is.
			MatchName: func(key, field string) bool { return key == field },
			Result:    &c,
			TagName:   "koanf",
		}})
		if err == nil {
			return c, reported
		}
		problems := decodeErrors(name, err)
		if attempt == 0 {
			reported = problems
			k = k.Copy()
		}
		dropped := false
		for _, p := range problems {
			if dropListValue(k, p.Key) {
				dropped = true
				continue
			}
			if key := decodedPath(p.Key); key != "" && k.Exists(key) {
				k.Delete(key)
				dropped = true
			}
		}
		if !dropped || attempt == 3 {
			return c, reported
		}
	}
}

// decodedPath is the koanf path to take out for a value that did not
// decode at key: the key itself, or the list holding it (an element of a
// list cannot be taken out alone).
func decodedPath(key string) string {
	parts := strings.Split(key, ".")
	for i, p := range parts {
		if _, err := strconv.Atoi(p); err == nil && i > 0 {
			return strings.Join(parts[:i], ".")
		}
	}
	return key
}

// fill applies the defaults of maps and lists.
func (c *Config) fill() {
	if len(c.Tiers.Names) == 0 {
		c.Tiers.Names = []string{c.Tiers.Default}
	}
	if len(c.Classes) == 0 {
		c.Classes = map[string]Class{"default": {Limits: map[string]Limit{
			c.Tiers.Default: builtInLimit,
		}}}
	}
	c.fillRegion()
	for n, cl := range c.Classes {
		if cl.Cost == 0 {
			cl.Cost = 1
		}
		if cl.Shares.Enabled && cl.Shares.Interval == 0 {
			cl.Shares.Interval = DefaultSharesInterval
		}
		if p := &cl.Penalty; p.After > 0 && p.Within == 0 {
			if l := cl.Limits[c.Tiers.Default].windowLimit(); !l.IsConcurrency() && l.Period > 0 {
				p.Within, p.withinDefault = l.Period, true
			}
		}
		c.Classes[n] = cl
	}
	if c.DefaultClass == "" {
		if len(c.Classes) == 1 {
			for n := range c.Classes {
				c.DefaultClass = n
			}
		} else if _, ok := c.Classes["default"]; ok {
			c.DefaultClass = "default"
		}
	}
}

// ClassNames returns the class names, sorted.
func (c *Config) ClassNames() []string {
	names := make([]string, 0, len(c.Classes))
	for n := range c.Classes {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Path resolves a file name from the config relative to the config file's directory.
func (c *Config) Path(p string) string {
	if p == "" || filepath.IsAbs(p) || c.dir == "" {
		return p
	}
	return filepath.Join(c.dir, p)
}
