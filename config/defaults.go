package config

import (
	"reflect"
	"slices"
	"time"

	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/v2"

	"github.com/rl-exporter/rl-exporter/collector"
	"github.com/rl-exporter/rl-exporter/heartbeat"
	"github.com/rl-exporter/rl-exporter/httplimit"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
	"github.com/rl-exporter/rl-exporter/livelimits"
	"github.com/rl-exporter/rl-exporter/overload"
	"github.com/rl-exporter/rl-exporter/region"
	"github.com/rl-exporter/rl-exporter/rls"
	"github.com/rl-exporter/rl-exporter/tracing"
)

// Defaults of the server section, also those of server.Config and
// server.TransportConfig for a caller that builds a server without a file.
const (
	DefaultShutdownTimeout   = 15 * time.Second
	DefaultReadyTimeout      = time.Second
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultReadTimeout       = 30 * time.Second
	DefaultIdleTimeout       = 2 * time.Minute
	// DefaultMaxHeaderBytes bounds a request's head as proxies in front
	// usually bound it.
	DefaultMaxHeaderBytes = 64 << 10
	DefaultMaxHeaderCount = 100
	// DefaultAuthMaxHeaderBytes bounds a forward-auth request's head:
	// net/http's own bound, what Caddy and Traefik accept and forward.
	DefaultAuthMaxHeaderBytes = 1 << 20
	// DefaultMaxIdleConnsPerHost is sized for a few hundred concurrent
	// clients, so that a steady load reuses upstream connections instead
	// of opening one per request (Go's default keeps two).
	DefaultMaxIdleConnsPerHost = 256
	DefaultIdleConnTimeout     = 90 * time.Second
	DefaultDialTimeout         = 5 * time.Second
	// DefaultResponseHeaderTimeout is nginx's proxy_read_timeout.
	DefaultResponseHeaderTimeout = 60 * time.Second
	// DefaultOverloadRetryAfter: a shed request is worth retrying once the
	// limit has had a few windows to move.
	DefaultOverloadRetryAfter = time.Second
)

// MaxHold bounds reserve.hold and lease_ttl: each is how long a reservation or lease outlives a
// holder that is gone, since a live one renews it.
const MaxHold = 24 * time.Hour

// DefaultLeaseTTL is a concurrency limit's lease_ttl when none is set.
const DefaultLeaseTTL = limiter.DefaultLeaseTTL

// Defaults returns the value of every key that has a default, typed: the
// one place they are declared. A file, the environment and flags are laid
// over them; `rl-exporter check --print-defaults` prints them. The keys left
// zero have no default. Each call returns a fresh Config.
func Defaults() Config {
	return Config{
		Server: Server{
			Listen: DefaultListen, ShutdownTimeout: DefaultShutdownTimeout, ReadyTimeout: DefaultReadyTimeout,
			// Clients that send slowly are cut off.
			ReadHeaderTimeout: DefaultReadHeaderTimeout, ReadTimeout: DefaultReadTimeout, IdleTimeout: DefaultIdleTimeout,
			MaxHeaderBytes: DefaultMaxHeaderBytes, MaxHeaderCount: DefaultMaxHeaderCount, AuthMaxHeaderBytes: DefaultAuthMaxHeaderBytes,
			// Paths are read as the strictest upstream reads them (Envoy's advice).
			Paths: Paths{EscapedSlashes: httplimit.PathsReject, Case: httplimit.PathsSensitive, TrailingSlash: httplimit.PathsIgnore},
			// The decision API answers this host alone unless configured.
			CheckAPI: CheckAPI{Enabled: true, AllowedPeers: []string{"127.0.0.0/8", "::1/128"}, Prefix: DefaultCheckAPIPrefix},
			UpstreamTransport: UpstreamTransport{
				MaxIdleConnsPerHost: DefaultMaxIdleConnsPerHost, IdleConnTimeout: DefaultIdleConnTimeout,
				DialTimeout: DefaultDialTimeout, ResponseHeaderTimeout: DefaultResponseHeaderTimeout,
			},
			Overload: Overload{Config: overload.Defaults(), RetryAfter: DefaultOverloadRetryAfter},
		},
		Log: Log{Format: "text", Level: "info"},
		Store: Store{
			Type: "memory", Timeout: limiter.DefaultTimeout, FailPolicy: string(limiter.FailOpen),
			// fail_policy local shares the limit among the instances that heartbeat.
			Breaker: StoreBreaker{Threshold: limiter.DefaultThreshold, Cooldown: limiter.DefaultCooldown},
			Local: StoreLocal{
				MinInstances: limiter.DefaultMinInstances, HeartbeatInterval: heartbeat.DefaultInterval, InstanceTTL: heartbeat.DefaultTTL,
				MaxKeys: limiter.DefaultLocalMaxKeys,
			},
			Redis: redisDefaults(),
		},
		Tiers: Tiers{Default: "default"},
		Identity: Identity{
			ClientIPHeader: httplimit.DefaultClientIPHeader,
			IPv4Prefix:     httplimit.DefaultIPv4Prefix, IPv6Prefix: httplimit.DefaultIPv6Prefix,
			RequireKnownAPIKey: true,
			APIKeySchemes:      slices.Clone(httplimit.DefaultAPIKeySchemes), UnusableAPIKey: UnusableAPIKeyAddress,
		},
		Headers: Headers{XRateLimit: true, RateLimit: true},
		Metrics: Metrics{
			MaxLabelSets: collector.DefaultMaxLabelSets, Exemplars: true, NearLimitShare: collector.DefaultNearLimitShare,
			TopKeys: collector.DefaultTopKeys, TopWindow: collector.DefaultTopWindow,
		},
		Tracing: Tracing{Exporter: string(tracing.ExporterNone), SampleRatio: tracing.DefaultSampleRatio, ServiceName: tracing.DefaultServiceName},
		Live:    Live{Enabled: true, RefreshInterval: livelimits.DefaultRefreshInterval},
		Reload:  Reload{Watch: true, Interval: DefaultReloadInterval},
		// What one request, and one connection, can make the gRPC service hold.
		RLS: RLS{
			ResponseHeaders: true, MaxDescriptors: rls.DefaultMaxDescriptors, MaxEntries: rls.DefaultMaxEntries, MaxOverrides: rls.DefaultMaxOverrides,
			MaxConcurrentStreams: rls.DefaultMaxConcurrentStreams, KeepaliveMinTime: rls.DefaultKeepaliveMinTime, KeepalivePermitWithoutStream: true,
			MaxConnectionIdle: rls.DefaultMaxConnectionIdle,
		},
		RLQS:   rlqsDefaults(),
		Region: Region{SyncInterval: region.DefaultSyncInterval, SyncTimeout: region.DefaultSyncTimeout, MaxClockSkew: region.DefaultMaxClockSkew},
	}
}

// redisDefaults is store.redis's defaults, package redisstore's: a refused
// connection fails at once; a Cluster's slot map is reloaded as soon as a
// failed call says it may be stale; a decision is answered once the
// primary ran its script. The key prefix, the pool size and the dial
// timeout are left to redisstore, unprinted.
func redisDefaults() Redis {
	sc, cc := redisstore.Defaults(), redisstore.ClientDefaults()
	return Redis{
		DialAttempts: cc.DialAttempts,
		Batch:        RedisBatch{MaxSize: sc.Batch.MaxSize, Senders: sc.Batch.Senders},
		Cluster: RedisCluster{
			RefreshMinInterval: sc.ClusterRefreshMinInterval,
			ReloadInterval:     cc.ClusterReloadInterval, MaxRedirects: cc.ClusterMaxRedirects,
		},
		Durability: "none", DurabilityTimeout: sc.DurabilityTimeout,
	}
}

// DefaultReloadInterval is reload.interval's default: the content check
// behind the file-system notifications.
const DefaultReloadInterval = 5 * time.Second

// builtInLimit is the limit of the built-in class, "default", the
// middleware's own default (httplimit.DefaultLimit).
var builtInLimit = func() Limit {
	l := httplimit.DefaultLimit()
	return Limit{Algorithm: string(l.Algorithm), Rate: l.Rate, Period: l.Period}
}()

// defaults is Defaults as koanf's flat keys, the set fields alone, with
// durations written as a file writes them ("15s"), loaded under the file.
// The classes and tier names get theirs in fill, so that a file's classes
// replace the built-in one instead of merging with it.
func defaults() map[string]any {
	out := map[string]any{}
	flattenSet(reflect.ValueOf(Defaults()), "", out)
	return out
}

// flattenSet adds the non-zero fields of the struct v to out under their
// koanf keys, prefixed.
func flattenSet(v reflect.Value, prefix string, out map[string]any) {
	for _, kf := range keyFields(v.Type()) {
		f := v.FieldByIndex(kf.Index)
		if f.IsZero() {
			continue
		}
		key := prefix + kf.Key
		switch {
		case f.Type() == durationType:
			out[key] = time.Duration(f.Int()).String()
		case f.Kind() == reflect.Struct:
			flattenSet(f, key+".", out)
		default:
			out[key] = f.Interface()
		}
	}
}

// DefaultsYAML is Defaults as a YAML file would write them, every key
// that has a default and nothing else, for `check --print-defaults`.
func DefaultsYAML() ([]byte, error) {
	k := koanf.New(".")
	if err := k.Load(confmap.Provider(defaults(), "."), nil); err != nil {
		return nil, err
	}
	return k.Marshal(yaml.Parser())
}
