package config

// This file turns a checked Config into the domain's values: the policy
// httplimit compiles, the Redis store's and client's settings, limits as
// package limiter takes them. validate.go says what is wrong with a file.

import (
	"cmp"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"strings"

	"github.com/rl-exporter/rl-exporter/httplimit"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
)

// RedisStoreConfig returns the Redis store's settings: the key prefix,
// how decisions are batched and what they wait for (durability).
func (c *Config) RedisStoreConfig() redisstore.Config {
	r := c.Store.Redis
	sc := redisstore.Config{
		Prefix:                    r.Prefix,
		Batch:                     redisstore.BatchConfig{Disabled: r.Batch.Disabled, MaxSize: r.Batch.MaxSize, Senders: r.Batch.Senders},
		ClusterRefreshMinInterval: r.Cluster.RefreshMinInterval,
	}
	if r.Durability == "wait" {
		sc.Durability, sc.DurabilityTimeout = redisstore.DurabilityWait, r.DurabilityTimeout
	}
	return sc
}

// RedisClientConfig returns how to reach Redis, reading the password file.
func (c *Config) RedisClientConfig() (redisstore.ClientConfig, error) {
	return c.redisClientConfig(c.Store.Redis)
}

// redisClientConfig returns how to reach the Redis r locates (store.redis
// or a peer region's), reading its password file.
func (c *Config) redisClientConfig(r Redis) (redisstore.ClientConfig, error) {
	cc := redisstore.ClientConfig{
		URL: r.URL, ClusterAddrs: r.ClusterAddrs, SentinelAddrs: r.SentinelAddrs, MasterName: r.SentinelMaster,
		PoolSize: r.PoolSize, DialTimeout: r.DialTimeout, Username: r.Username, Password: r.Password.Reveal(),
	}
	if r.PoolSize < 0 {
		return cc, &limiter.FieldError{Field: "pool_size", Err: fmt.Errorf("must be >= 0, got %d", r.PoolSize)}
	}
	if r.DialTimeout < 0 {
		return cc, &limiter.FieldError{Field: "dial_timeout", Err: fmt.Errorf("must be >= 0, got %s", r.DialTimeout)}
	}
	if r.DialAttempts < 1 || r.DialAttempts > MaxRedisDialAttempts {
		return cc, &limiter.FieldError{Field: "dial_attempts", Err: fmt.Errorf("must be between 1 and %d, got %d", MaxRedisDialAttempts, r.DialAttempts)}
	}
	cc.DialAttempts = r.DialAttempts
	if rc := r.Cluster; rc.RefreshMinInterval <= 0 {
		return cc, &limiter.FieldError{Field: "cluster.refresh_min_interval", Err: fmt.Errorf("must be > 0, got %s", rc.RefreshMinInterval)}
	}
	if rc := r.Cluster; rc.ReloadInterval <= 0 {
		return cc, &limiter.FieldError{Field: "cluster.reload_interval", Err: fmt.Errorf("must be > 0, got %s", rc.ReloadInterval)}
	}
	if rc := r.Cluster; rc.MaxRedirects < 0 || rc.MaxRedirects > MaxRedisClusterRedirects {
		return cc, &limiter.FieldError{Field: "cluster.max_redirects", Err: fmt.Errorf("must be between 0 and %d, got %d", MaxRedisClusterRedirects, rc.MaxRedirects)}
	}
	cc.ClusterReloadInterval = r.Cluster.ReloadInterval
	cc.ClusterMaxRedirects = r.Cluster.MaxRedirects
	if cc.ClusterMaxRedirects == 0 {
		cc.ClusterMaxRedirects = -1 // none; 0 is the client's default
	}
	if r.URL != "" {
		// Checked here to name the key; the message never shows the URL's
		// password.
		if _, err := redisstore.ParseURL(r.URL); err != nil {
			return cc, &limiter.FieldError{Field: "url", Err: err}
		}
	}
	if r.PasswordFile != "" && r.Password != "" {
		return cc, errors.New("password and password_file: set one, not both")
	}
	tc, err := c.redisTLS(r.TLS)
	if err != nil {
		return cc, &limiter.FieldError{Field: "tls", Err: err}
	}
	cc.TLS = tc
	if r.PasswordFile != "" {
		b, err := os.ReadFile(c.Path(r.PasswordFile))
		if err != nil {
			return cc, &limiter.FieldError{Field: "password_file", Err: err}
		}
		cc.Password = strings.TrimRight(string(b), "\r\n")
	}
	if _, err := cc.Options(); err != nil {
		return cc, err
	}
	return cc, nil
}

// redisTLS builds the TLS configuration t (store.redis.tls or a peer's),
// reading its files.
func (c *Config) redisTLS(t RedisTLS) (*tls.Config, error) {
	if !t.Enabled {
		if t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" || t.ServerName != "" || t.InsecureSkipVerify {
			return nil, errors.New("enabled: must be true when other tls keys are set")
		}
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName, InsecureSkipVerify: t.InsecureSkipVerify} //nolint:gosec // an explicit, documented opt-in
	if t.CAFile != "" {
		pool, err := c.caPool("ca_file", t.CAFile)
		if err != nil {
			return nil, err
		}
		tc.RootCAs = pool
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		return nil, errors.New("cert_file and key_file: set both or neither")
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.Path(t.CertFile), c.Path(t.KeyFile))
		if err != nil {
			return nil, fmt.Errorf("cert_file/key_file: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// caPool reads the PEM certificates of file, set by key, into a pool.
func (c *Config) caPool(key, file string) (*x509.CertPool, error) {
	b, err := os.ReadFile(c.Path(file))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s: %s holds no PEM certificate", key, file)
	}
	return pool, nil
}

// CheckAPIPeers returns server.check_api.allowed_peers parsed, a single
// address as its own /32 or /128.
func (c *Config) CheckAPIPeers() ([]netip.Prefix, error) {
	return prefixes("server.check_api.allowed_peers", c.Server.CheckAPI.AllowedPeers)
}

// prefixes parses the CIDRs (or single addresses) of the list at key.
func prefixes(key string, list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, p := range list {
		pre, err := parsePrefix(p)
		if err != nil {
			return nil, fmt.Errorf("%s: %q: %w", key, p, err)
		}
		out = append(out, pre)
	}
	return out, nil
}

func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		return p.Masked(), err
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

func (c *Config) jwtConfig() (*httplimit.JWTConfig, error) {
	j := c.Identity.JWT
	if j.Algorithm == "" {
		return nil, nil
	}
	out := &httplimit.JWTConfig{Header: j.Header, Algorithm: j.Algorithm, Issuer: j.Issuer, Audience: j.Audience, Leeway: j.Leeway}
	switch {
	case strings.HasPrefix(j.Algorithm, "HS"):
		if j.SecretFile == "" {
			return nil, fmt.Errorf("secret_file: required for %s", j.Algorithm)
		}
		b, err := os.ReadFile(c.Path(j.SecretFile))
		if err != nil {
			return nil, fmt.Errorf("secret_file: %w", err)
		}
		out.Secret = []byte(strings.TrimRight(string(b), "\r\n"))
		if len(out.Secret) < 16 {
			return nil, fmt.Errorf("secret_file: the secret is %d bytes; use at least 16", len(out.Secret))
		}
	case strings.HasPrefix(j.Algorithm, "RS"), strings.HasPrefix(j.Algorithm, "ES"):
		if j.PublicKeyFile == "" {
			return nil, fmt.Errorf("public_key_file: required for %s", j.Algorithm)
		}
		b, err := os.ReadFile(c.Path(j.PublicKeyFile))
		if err != nil {
			return nil, fmt.Errorf("public_key_file: %w", err)
		}
		out.PublicKeyPEM = b
	default:
		return nil, fmt.Errorf("algorithm: %q is not supported (want HS256, HS384, HS512, RS256, RS384, RS512, ES256, ES384 or ES512)", j.Algorithm)
	}
	// Parse the key now, so a bad file is reported here with its key name.
	if _, err := httplimit.NewPolicy(httplimit.PolicyConfig{Store: limiter.NewMemoryStore(limiter.MemoryConfig{}), Identity: httplimit.IdentityConfig{JWT: out}}); err != nil {
		return nil, fmt.Errorf("%s", strings.TrimPrefix(err.Error(), "policy: identity: jwt: "))
	}
	return out, nil
}

// TierLimit is class's limit for tier: the tier's own, else the default tier's.
func (c *Config) TierLimit(class, tier string) Limit {
	cl := c.Classes[class]
	if l, ok := cl.Limits[tier]; ok {
		return l
	}
	return cl.Limits[c.Tiers.Default]
}

// IsConcurrency reports whether the limit is algorithm concurrency: a cap
// on requests in flight, enforced by limiter.Leases, not limiter.Limiter.
func (l Limit) IsConcurrency() bool { return l.Algorithm == string(limiter.Concurrency) }

// Lease returns a concurrency limit as the limiter package takes it.
func (l Limit) Lease() limiter.LeaseLimit {
	return limiter.LeaseLimit{Limit: l.Limit, TTL: cmp.Or(l.LeaseTTL, DefaultLeaseTTL)}
}

// Limiter returns the limit as the limiter package takes it.
func (l Limit) Limiter() limiter.Limit { return l.limit() }

func (l Limit) limit() limiter.Limit {
	return limiter.Limit{
		Algorithm: limiter.Algorithm(l.Algorithm), Rate: l.Rate, Period: l.Period, Burst: l.Burst,
		NoDelay: l.NoDelay, AlignWindows: l.AlignWindows, Calendar: l.Calendar.limiter(),
	}
}

// PolicyConfig converts c into what httplimit.NewPolicy compiles, deciding
// on store. It reads the JWT secret or key file.
func (c *Config) PolicyConfig(store limiter.Store, observer limiter.Observer) (httplimit.PolicyConfig, error) {
	pc := httplimit.PolicyConfig{
		DefaultClass: c.DefaultClass,
		Tiers:        c.Tiers.Names,
		DefaultTier:  c.Tiers.Default,
		Store:        store,
		FailPolicy:   limiter.FailPolicy(c.Store.FailPolicy),
		Timeout:      c.Store.Timeout,
		Observer:     observer,
		Paths:        c.Server.Paths.HTTPLimit(),
		Headers: httplimit.HeaderConfig{
			OmitXRateLimit: !c.Headers.XRateLimit,
			OmitRateLimit:  !c.Headers.RateLimit,
			Legacy:         c.Headers.Legacy,
			ProblemJSON:    c.Headers.ProblemJSON,
		},
		Identity: httplimit.IdentityConfig{
			UserHeader:           c.Identity.UserHeader,
			APIKeyHeaders:        c.Identity.APIKeyHeader,
			APIKeySchemes:        c.Identity.APIKeySchemes,
			AllowUnknownAPIKeys:  !c.Identity.RequireKnownAPIKey,
			RefuseUnusableAPIKey: c.Identity.UnusableAPIKey == UnusableAPIKeyRefuse,
			TierHeader:           c.Tiers.Header,
			ClientIPHeader:       c.Identity.ClientIPHeader,
			TrustedHops:          c.Identity.TrustedHops,
			IPv4Prefix:           c.Identity.IPv4Prefix,
			IPv6Prefix:           c.Identity.IPv6Prefix,
		},
	}
	if c.Store.Type == "redis" {
		// Callers that share one breaker among their limiters set
		// pc.Guard, which takes precedence.
		pc.Breaker = limiter.BreakerConfig{Threshold: c.Store.Breaker.Threshold, Cooldown: c.Store.Breaker.Cooldown}
	}
	var err error
	if pc.Identity.TrustedProxies, err = prefixes("identity.trusted_proxies", c.Identity.TrustedProxies); err != nil {
		return pc, err
	}
	if pc.Identity.TrustedHeaderPeers, err = prefixes("identity.trusted_header_peers", c.Identity.TrustedHeaderPeers); err != nil {
		return pc, err
	}
	pc.Identity.TierByKey = tierOf(c.Tiers.Keys)
	pc.Identity.TierByAPIKey = tierOf(c.Tiers.APIKeys)
	j, err := c.jwtConfig()
	if err != nil {
		return pc, fmt.Errorf("identity.jwt: %w", err)
	}
	pc.Identity.JWT = j
	for _, name := range c.ClassNames() {
		pc.Classes = append(pc.Classes, c.Classes[name].httplimit(name))
	}
	return pc, nil
}

// tierOf inverts the lists of keys per tier into each key's tier; nil
// when there are none.
func tierOf(byTier map[string][]string) map[string]string {
	if len(byTier) == 0 {
		return nil
	}
	out := map[string]string{}
	for tier, keys := range byTier {
		for _, k := range keys {
			out[k] = tier
		}
	}
	return out
}

// httplimit is the class named name as httplimit compiles it: a
// concurrency limit becomes a tier's lease limit, a list its tier limits,
// the others its limit.
func (cl Class) httplimit(name string) httplimit.Class {
	hc := httplimit.Class{Name: name, Routes: cl.Routes, Shadow: cl.Shadow, Shared: cl.Shared, Cost: cl.Cost, Limits: map[string]limiter.Limit{},
		Penalty: cl.Penalty.Penalty}
	if cl.CostFrom != nil {
		hc.CostFrom, hc.Estimate = *cl.CostFrom, cl.estimate()
		hc.Hold = cl.Reserve.Hold
		hc.OnExpiry, _ = limiter.ParseExpiryPolicy(cl.Reserve.OnExpiry) // validated
	}
	for tier, l := range cl.Limits {
		if l.List != nil {
			if hc.TierLimits == nil {
				hc.TierLimits = map[string][]httplimit.TierLimit{}
			}
			for _, nl := range l.List {
				hc.TierLimits[tier] = append(hc.TierLimits[tier], cl.resolve(nl).httplimit())
			}
			continue
		}
		if l.IsConcurrency() {
			if hc.Leases == nil {
				hc.Leases = map[string]limiter.LeaseLimit{}
			}
			hc.Leases[tier] = l.Lease()
			continue
		}
		hc.Limits[tier] = l.limit()
	}
	return hc
}

// SlogLevel is the configured log level.
func (c *Config) SlogLevel() slog.Level {
	var l slog.Level
	_ = l.UnmarshalText([]byte(c.Log.Level))
	return l
}

// HTTPLimit is p as httplimit takes it.
func (p Paths) HTTPLimit() httplimit.Paths {
	return httplimit.Paths{EscapedSlashes: p.EscapedSlashes, Case: p.Case, TrailingSlash: p.TrailingSlash}
}

// estimate is the class's estimate, its default the class cost when unset.
func (cl Class) estimate() Estimate {
	var est Estimate
	if cl.Estimate != nil {
		est = *cl.Estimate
	}
	if est.Default == 0 {
		est.Default = cl.Cost
	}
	return est
}
