package config

// This file says what is wrong with a file: every problem, each naming its
// key (see FieldError). convert.go turns a checked Config into the domain's
// values.

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/rl-exporter/rl-exporter/httplimit"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/region"
)

// Validate reports every problem of c, each naming the file, the key and
// the reason, as Problems; nil when c is usable.
func (c *Config) Validate() error { return c.problems().err() }

// problems is every problem of c; see FieldError for how to add a check.
func (c *Config) problems() Problems {
	e := &errs{source: c.Source}
	c.validateServer(e)
	c.validateStore(e)
	c.validateTiers(e)
	c.validateIdentity(e)
	c.validateClasses(e)
	c.validateMetrics(e)
	c.validateTracing(e)
	c.validateAdmin(e)
	c.validateLive(e)
	c.validateRLS(e)
	c.validateRLQS(e)
	c.validateRegion(e)
	c.validateOverload(e)
	if len(e.list) == 0 {
		// Everything named is fine on its own; compile the policy to catch
		// what only shows together (two classes claiming one route).
		pc, err := c.PolicyConfig(limiter.NewMemoryStore(limiter.MemoryConfig{}), nil)
		if err == nil {
			_, err = httplimit.NewPolicy(pc)
		}
		if err != nil {
			e.add("classes", "%s", strings.TrimPrefix(err.Error(), "policy: "))
		}
	}
	return e.list
}

func validAddr(a string) error {
	_, port, err := net.SplitHostPort(a)
	if err != nil {
		return err
	}
	if port == "" {
		return fmt.Errorf("no port")
	}
	return nil
}

func (c *Config) validateServer(e *errs) {
	s := c.Server
	seen := map[string]string{}
	for _, l := range []struct{ key, addr string }{
		{"server.listen", s.Listen}, {"server.metrics_listen", s.MetricsListen}, {"server.admin_listen", s.AdminListen},
		{"server.auth_listen", s.AuthListen},
	} {
		if l.addr == "" {
			if l.key == "server.listen" {
				e.add(l.key, "required")
			}
			continue
		}
		if err := validAddr(l.addr); err != nil {
			e.add(l.key, "%q is not host:port: %v", l.addr, err)
			continue
		}
		if other, dup := seen[l.addr]; dup && !strings.HasSuffix(l.addr, ":0") {
			e.add(l.key, "%q is already %s", l.addr, other)
		}
		seen[l.addr] = l.key
	}
	if s.Upstream != "" {
		u, err := url.Parse(s.Upstream)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			e.add("server.upstream", "%q is not an http:// or https:// URL with a host", s.Upstream)
		}
	}
	if s.ShutdownTimeout <= 0 {
		e.add("server.shutdown_timeout", "must be > 0, got %s", s.ShutdownTimeout)
	}
	if s.ReadyTimeout <= 0 {
		e.add("server.ready_timeout", "must be > 0, got %s", s.ReadyTimeout)
	}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{{"server.read_header_timeout", s.ReadHeaderTimeout}, {"server.read_timeout", s.ReadTimeout}, {"server.idle_timeout", s.IdleTimeout}} {
		if d.v <= 0 {
			e.add(d.key, "must be > 0, got %s", d.v)
		}
	}
	if s.ReadHeaderTimeout > s.ReadTimeout && s.ReadTimeout > 0 {
		e.add("server.read_header_timeout", "%s is longer than server.read_timeout %s, which bounds the headers too", s.ReadHeaderTimeout, s.ReadTimeout)
	}
	if s.MaxHeaderBytes < 8192 || s.MaxHeaderBytes > 16<<20 {
		e.add("server.max_header_bytes", "must be 8192 to 16777216 (16 MiB), got %d", s.MaxHeaderBytes)
	}
	if s.AuthMaxHeaderBytes < 8192 || s.AuthMaxHeaderBytes > 16<<20 {
		e.add("server.auth_max_header_bytes", "must be 8192 to 16777216 (16 MiB), got %d", s.AuthMaxHeaderBytes)
	}
	if s.MaxHeaderCount < 1 || s.MaxHeaderCount > 100_000 {
		e.add("server.max_header_count", "must be 1 to 100000, got %d", s.MaxHeaderCount)
	}
	if err := s.Paths.HTTPLimit().Validate(); err != nil {
		e.addField("server.paths", err)
	}
	for i, p := range s.CheckAPI.AllowedPeers {
		if _, err := parsePrefix(p); err != nil {
			e.add(fmt.Sprintf("server.check_api.allowed_peers[%d]", i), "%q is not a CIDR or an IP address", p)
		}
	}
	c.validateUpstreamTransport(e)
	if _, err := c.CheckAPITokens(); err != nil {
		e.add("server.check_api", "%v", err)
	}
	if msg := prefixProblem(s.CheckAPI.Prefix); msg != "" {
		e.add("server.check_api.prefix", "%q: %s", s.CheckAPI.Prefix, msg)
	}
	if s.CheckAPI.Enabled && len(s.CheckAPI.AllowedPeers) == 0 {
		e.add("server.check_api.allowed_peers", "empty, so no caller could use the decision API: list its callers, or set server.check_api.enabled: false to turn it off")
	}
	if c.Log.Format != "text" && c.Log.Format != "json" {
		e.addHint("log.format", suggest(c.Log.Format, []string{"text", "json"}), "%q: want text or json", c.Log.Format)
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(c.Log.Level)); err != nil {
		e.addHint("log.level", suggest(c.Log.Level, []string{"debug", "info", "warn", "error"}), "%q: want debug, info, warn or error", c.Log.Level)
	}
}

func (c *Config) validateUpstreamTransport(e *errs) {
	t := c.Server.UpstreamTransport
	const key = "server.upstream_transport."
	if t.MaxIdleConnsPerHost < 1 || t.MaxIdleConnsPerHost > 1<<16 {
		e.add(key+"max_idle_conns_per_host", "must be 1 to 65536, got %d", t.MaxIdleConnsPerHost)
	}
	if t.IdleConnTimeout <= 0 {
		e.add(key+"idle_conn_timeout", "must be > 0, got %s", t.IdleConnTimeout)
	}
	if t.DialTimeout <= 0 {
		e.add(key+"dial_timeout", "must be > 0, got %s", t.DialTimeout)
	}
	if t.ResponseHeaderTimeout < 0 {
		e.add(key+"response_header_timeout", "must be >= 0 (0: no bound), got %s", t.ResponseHeaderTimeout)
	}
	if t.H2C && strings.HasPrefix(strings.ToLower(c.Server.Upstream), "https:") {
		e.add(key+"h2c", "applies to an http:// upstream; %s negotiates HTTP/2 through TLS on its own", c.Server.Upstream)
	}
}

func (c *Config) validateStore(e *errs) {
	s := c.Store
	switch s.Type {
	case "memory":
	case "redis":
		if _, err := c.RedisClientConfig(); err != nil {
			e.addField("store.redis", err)
		}
	default:
		e.addHint("store.type", suggest(s.Type, []string{"memory", "redis"}), "%q: want memory or redis", s.Type)
	}
	if s.Timeout <= 0 {
		e.add("store.timeout", "must be > 0, got %s", s.Timeout)
	}
	if _, err := limiter.ParseFailPolicy(s.FailPolicy); err != nil {
		e.add("store.fail_policy", "%v", err)
	}
	if s.Breaker.Threshold < 0 {
		e.add("store.breaker.threshold", "must be >= 0 (0 disables the breaker), got %d", s.Breaker.Threshold)
	}
	if s.Breaker.Threshold > 0 && s.Breaker.Cooldown <= 0 {
		e.add("store.breaker.cooldown", "must be > 0, got %s", s.Breaker.Cooldown)
	}
	if l := s.Local; l.MinInstances < 1 {
		e.add("store.local.min_instances", "must be >= 1, got %d", l.MinInstances)
	}
	if l := s.Local; l.HeartbeatInterval <= 0 {
		e.add("store.local.heartbeat_interval", "must be > 0, got %s", l.HeartbeatInterval)
	} else if l.InstanceTTL <= l.HeartbeatInterval {
		e.add("store.local.instance_ttl", "must be longer than store.local.heartbeat_interval (%s), got %s", l.HeartbeatInterval, l.InstanceTTL)
	}
	if l := s.Local; l.MaxKeys < 1 {
		e.add("store.local.max_keys", "must be >= 1, got %d", l.MaxKeys)
	}
	if strings.ContainsAny(s.Redis.Prefix, "{}") {
		e.add("store.redis.prefix", "%q must not contain '{' or '}'", s.Redis.Prefix)
	}
	if b := s.Redis.Batch; b.MaxSize < 1 || b.MaxSize > MaxRedisBatchSize {
		e.add("store.redis.batch.max_size", "must be between 1 and %d, got %d", MaxRedisBatchSize, b.MaxSize)
	}
	if b := s.Redis.Batch; b.Senders < 1 || b.Senders > MaxRedisBatchSenders {
		e.add("store.redis.batch.senders", "must be between 1 and %d, got %d", MaxRedisBatchSenders, b.Senders)
	}
	switch r := s.Redis; r.Durability {
	case "none":
	case "wait":
		if len(r.ClusterAddrs) > 0 {
			e.add("store.redis.durability", "wait is not supported with store.redis.cluster_addrs")
		}
		for name, p := range c.Region.Peers {
			if len(p.ClusterAddrs) > 0 {
				e.add("store.redis.durability", "wait is not supported with region.peers.%s.cluster_addrs", name)
			}
		}
		if r.DurabilityTimeout < time.Millisecond || r.DurabilityTimeout >= s.Timeout {
			e.add("store.redis.durability_timeout", "must be at least 1ms and below store.timeout (%s), got %s", s.Timeout, r.DurabilityTimeout)
		}
		c.validateDurabilityReadTimeout(e)
	default:
		e.add("store.redis.durability", "must be none or wait, got %q", r.Durability)
	}
}

func (c *Config) validateMetrics(e *errs) {
	m := c.Metrics
	if m.MaxLabelSets < 1 {
		e.add("metrics.max_label_sets", "must be >= 1, got %d", m.MaxLabelSets)
	}
	if !(m.NearLimitShare > 0 && m.NearLimitShare <= 1) { // NaN too
		e.add("metrics.near_limit_share", "must be in (0, 1], got %g", m.NearLimitShare)
	}
	if m.TopKeys < 1 {
		e.add("metrics.top_keys", "must be >= 1, got %d", m.TopKeys)
	}
	if m.TopWindow <= 0 {
		e.add("metrics.top_window", "must be > 0, got %s", m.TopWindow)
	}
	if m.WebConfigFile != "" {
		if _, err := os.Stat(c.Path(m.WebConfigFile)); err != nil {
			e.add("metrics.web_config_file", "%v", err)
		}
	}
}

func (c *Config) validateTracing(e *errs) {
	t := c.Tracing
	switch t.Exporter {
	case "none", "stdout", "otlp-grpc", "otlp-http":
	default:
		e.addHint("tracing.exporter", suggest(t.Exporter, []string{"none", "stdout", "otlp-grpc", "otlp-http"}), "%q: want none, stdout, otlp-grpc or otlp-http", t.Exporter)
	}
	if !(t.SampleRatio >= 0 && t.SampleRatio <= 1) { // NaN too
		e.add("tracing.sample_ratio", "must be in [0, 1], got %g", t.SampleRatio)
	}
	if t.ServiceName == "" {
		e.add("tracing.service_name", "required")
	}
}

func (c *Config) validateAdmin(e *errs) {
	if _, err := c.AdminTokens(); err != nil {
		e.add("admin", "%v", err)
	}
}

func (c *Config) validateLive(e *errs) {
	if c.Live.RefreshInterval < 100*time.Millisecond {
		e.add("live.refresh_interval", "must be at least 100ms, got %s", c.Live.RefreshInterval)
	}
	if c.Reload.Interval < 100*time.Millisecond {
		e.add("reload.interval", "must be at least 100ms, got %s", c.Reload.Interval)
	}
}

func (c *Config) validateTiers(e *errs) {
	t := c.Tiers
	seen := map[string]bool{}
	for i, n := range t.Names {
		if !httplimit.ValidName(n) {
			e.add(fmt.Sprintf("tiers.names[%d]", i), "%q: letters, digits, '_' and '-' only", n)
		}
		if seen[n] {
			e.add(fmt.Sprintf("tiers.names[%d]", i), "%q listed twice", n)
		}
		seen[n] = true
	}
	if !seen[t.Default] {
		e.addHint("tiers.default", suggest(t.Default, t.Names), "%q is not one of tiers.names %v", t.Default, t.Names)
	}
	// User ids and API keys are separate namespaces: the same string may
	// be in both lists, each list's entries on one tier only.
	for _, list := range []struct {
		key  string
		keys map[string][]string
	}{{"tiers.keys", t.Keys}, {"tiers.api_keys", t.APIKeys}} {
		owner := map[string]string{}
		for tier, keys := range list.keys {
			if !seen[tier] {
				e.addHint(list.key+"."+tier, suggest(tier, t.Names), "unknown tier (tiers.names is %v)", t.Names)
			}
			for _, k := range keys {
				if k == "" {
					e.add(list.key+"."+tier, "empty key")
				}
				if o, dup := owner[k]; dup && o != tier {
					e.add(list.key+"."+tier, "a key is also listed under %s", o)
				}
				owner[k] = tier
			}
		}
	}
}

func (c *Config) validateIdentity(e *errs) {
	id := c.Identity
	for _, list := range []struct {
		key   string
		cidrs []string
	}{{"identity.trusted_proxies", id.TrustedProxies}, {"identity.trusted_header_peers", id.TrustedHeaderPeers}} {
		for i, p := range list.cidrs {
			if _, err := parsePrefix(p); err != nil {
				e.add(fmt.Sprintf("%s[%d]", list.key, i), "%q is not a CIDR or an IP address", p)
			}
		}
	}
	c.validateClientIP(e)
	if len(id.TrustedHeaderPeers) == 0 {
		// Such a header could never be believed; saying so beats keying
		// every request by IP without a word.
		for _, h := range []struct{ key, name string }{{"identity.user_header", id.UserHeader}, {"tiers.header", c.Tiers.Header}} {
			if h.name != "" {
				e.add(h.key, "%s is believed only from identity.trusted_header_peers, which is empty: list the gateways that set it", h.name)
			}
		}
	}
	if len(id.APIKeyHeader) > 0 && id.RequireKnownAPIKey && len(c.Tiers.APIKeys) == 0 {
		e.add("identity.api_key_header", "%s would never identify a client: identity.require_known_api_key is true (the default) and tiers.api_keys lists no key; list the keys under tiers.api_keys, or set require_known_api_key: false to give every key a budget of its own", strings.Join(id.APIKeyHeader, ", "))
	}
	c.validateAPIKeys(e)
	j := id.JWT
	if j.Algorithm == "" {
		if j.SecretFile != "" || j.PublicKeyFile != "" {
			e.add("identity.jwt.algorithm", "required when a secret or key file is set")
		}
		return
	}
	if _, err := c.jwtConfig(); err != nil {
		e.add("identity.jwt", "%v", err)
	}
}

// validateClientIP checks where the client address is read from and how
// addresses are grouped.
func (c *Config) validateClientIP(e *errs) {
	id := c.Identity
	h := id.ClientIPHeader
	if !httplimit.ValidHeaderName(h) {
		e.add("identity.client_ip_header", "%q is not a header name (letters, digits and !#$%%&'*+-.^_`|~; default X-Forwarded-For)", h)
	} else if len(id.TrustedProxies) == 0 && !strings.EqualFold(h, httplimit.DefaultClientIPHeader) {
		e.add("identity.client_ip_header", "%s is believed only from identity.trusted_proxies, which is empty: list the proxies that set it", h)
	}
	switch {
	case id.TrustedHops < 0:
		e.add("identity.trusted_hops", "%d: must be 0 (walk past trusted_proxies) or the number of proxies in front of the direct peer", id.TrustedHops)
	case id.TrustedHops > 0 && httplimit.ValidHeaderName(h) && !httplimit.IsListHeader(h):
		e.add("identity.trusted_hops", "%d: identity.client_ip_header %s holds one address, not a list of hops (only X-Forwarded-For and Forwarded have hops)", id.TrustedHops, h)
	case id.TrustedHops > 0 && len(id.TrustedProxies) == 0:
		e.add("identity.trusted_hops", "%d: hops are counted only from identity.trusted_proxies, which is empty: list the proxies", id.TrustedHops)
	}
	if id.IPv4Prefix < httplimit.MinIPv4Prefix || id.IPv4Prefix > 32 {
		e.add("identity.ipv4_prefix", "%d: must be %d to 32 (default %d, one address); a shorter prefix would share one budget among unrelated networks", id.IPv4Prefix, httplimit.MinIPv4Prefix, httplimit.DefaultIPv4Prefix)
	}
	if id.IPv6Prefix < httplimit.MinIPv6Prefix || id.IPv6Prefix > 128 {
		e.add("identity.ipv6_prefix", "%d: must be %d to 128 (default %d, one subnet); a shorter prefix would share one budget among unrelated networks", id.IPv6Prefix, httplimit.MinIPv6Prefix, httplimit.DefaultIPv6Prefix)
	}
}

func (c *Config) validateClasses(e *errs) {
	tiers := map[string]bool{}
	for _, t := range c.Tiers.Names {
		tiers[t] = true
	}
	for _, name := range c.ClassNames() {
		cl := c.Classes[name]
		key := "classes." + name
		if !httplimit.ValidName(name) {
			e.add(key, "class name: letters, digits, '_' and '-' only")
		}
		for i, r := range cl.Routes {
			if err := httplimit.ValidatePattern(r); err != nil {
				e.add(fmt.Sprintf("%s.routes[%d]", key, i), "%q: %v", r, err)
			}
		}
		if _, ok := cl.Limits[c.Tiers.Default]; !ok {
			e.add(key+".limits", "no limit for the default tier %q", c.Tiers.Default)
		}
		if cl.Cost < 1 {
			e.add(key+".cost", "must be >= 1, got %d", cl.Cost)
		}
		validatePenalty(e, key+".penalty", cl, cl.Limits[c.Tiers.Default].windowLimit())
		cost := cl.Cost
		if cl.CostFrom != nil {
			cost = cl.estimate().Default
		}
		cl.validateCost(e, key)
		c.validateShares(e, name, cl)
		if cl.CostFrom != nil && onlyConcurrency(cl.Limits) {
			e.add(key+".cost_from", "every limit of class %s is algorithm concurrency, which counts requests in flight and has no cost to settle: remove cost_from, or give a tier a rate limit", name)
		}
		for tier, l := range cl.Limits {
			lk := key + ".limits." + tier
			if !tiers[tier] {
				e.addHint(lk, suggest(tier, c.Tiers.Names), "unknown tier (tiers.names is %v)", c.Tiers.Names)
				continue
			}
			if l.List != nil {
				c.validateTierList(e, name, tier, l)
				continue
			}
			c.validateLimit(e, lk, name, tier, l, cost, cl.CostFrom != nil)
		}
	}
	if _, ok := c.Classes[c.DefaultClass]; !ok {
		if c.DefaultClass == "" {
			e.add("default_class", "required when there are several classes and none is named \"default\"")
		} else {
			e.addHint("default_class", suggest(c.DefaultClass, c.ClassNames()), "%q is not a class (classes are %v)", c.DefaultClass, c.ClassNames())
		}
	}
}

// validateLimit checks the limit l at lk, of class's tier, that takes
// cost per request; reserves: it holds the reservations of cost_from.
func (c *Config) validateLimit(e *errs, lk, class, tier string, l Limit, cost int64, reserves bool) {
	for _, p := range l.Calendar.problems() {
		e.add(lk+"."+p.Field, "%v", p.Err)
	}
	if l.IsConcurrency() || l.Limit != 0 || l.LeaseTTL != 0 {
		hint := "" // limit or lease_ttl with an algorithm that was meant to be concurrency
		if !l.IsConcurrency() {
			hint = suggest(l.Algorithm, algorithmNames())
		}
		for _, p := range leaseProblems(l) {
			e.addHint(lk+"."+p[0], hint, "%s", p[1])
		}
		return
	}
	if reserves {
		if a, err := limiter.ParseAlgorithm(l.Algorithm); err == nil && !limiter.SupportsReservations(a) {
			e.add(lk+".algorithm", "%s cannot give back or take the difference of a reservation, which cost_from needs", a)
		}
		if m := c.RegionMode(class, tier); m == region.ModeAsync || m == region.ModeHybrid {
			e.add(lk+".region_mode", "%s decides on a local copy, which cannot hold the reservations cost_from needs: use local or strict", m)
		}
	}
	for _, p := range limitProblems(l.limit(), cost) {
		key, hint := lk, ""
		if p.Field != "" {
			key += "." + p.Field
		}
		if p.Field == "algorithm" {
			hint = suggest(l.Algorithm, algorithmNames())
		}
		e.addHint(key, hint, "%v", p.Err)
	}
}

// validatePenalty checks a class's penalty, naming the field at fault;
// def is the class's limit for the default tier, whose period is within's
// default.
func validatePenalty(e *errs, key string, cl Class, def Limit) {
	p := cl.Penalty
	if p == (Penalty{}) {
		return
	}
	if p.After < 1 {
		e.add(key+".after", "must be >= 1 to turn the penalty box on, got %d", p.After)
		return
	}
	within := p.Within
	if within == 0 && !def.IsConcurrency() {
		// The default tier's limit has no usable period (or none at
		// all): its own problem is reported, within's default with it.
		within = time.Second
	}
	lp := p.Penalty
	lp.Within = within
	var fe *limiter.FieldError
	if err := lp.Validate(); errors.As(err, &fe) {
		msg := fe.Err.Error()
		if fe.Field == "within" && within == 0 {
			msg += "; unset, it is the period of the class's limit for the default tier, which has none (algorithm concurrency): set it"
		}
		e.add(key+"."+fe.Field, "%s", msg)
	}
	modes := map[string]bool{cl.RegionMode: true}
	for _, l := range cl.Limits {
		modes[l.regionMode()] = true
	}
	for mode := range modes {
		if mode != "" && mode != "local" {
			e.add(key, "not supported with region_mode %s (of the class or one of its tiers): the penalty box lives in the local store only", mode)
			break
		}
	}
}

// ValidateLimit checks a limit as the config file's limits are checked: the
// limit itself, and a quota that admits one request of the class's cost.
// The error is a *limiter.FieldError naming the field at fault.
func ValidateLimit(l limiter.Limit, cost int64) error {
	if err := l.Validate(); err != nil {
		return err
	}
	if cost > 1 {
		if err := l.CheckCost(cost); err != nil {
			field := "rate"
			if l.Algorithm.IsBucket() && l.Burst > 0 {
				field = "burst"
			}
			return &limiter.FieldError{Field: field, Err: fmt.Errorf("the quota %d is below the class cost %d, so no request could ever pass", l.Quota(), cost)}
		}
	}
	return nil
}

// onlyConcurrency reports whether limits has limits and every one, or
// every one of a tier's list, is algorithm concurrency.
func onlyConcurrency(limits map[string]Limit) bool {
	for _, l := range limits {
		if l.List == nil && !l.IsConcurrency() {
			return false
		}
		for _, nl := range l.List {
			if !nl.IsConcurrency() {
				return false
			}
		}
	}
	return len(limits) > 0
}

// leaseProblems returns the {field, problem} pairs of a limit that is, or
// means to be, algorithm concurrency.
func leaseProblems(l Limit) [][2]string {
	if !l.IsConcurrency() {
		field := "limit"
		if l.Limit == 0 {
			field = "lease_ttl"
		}
		return [][2]string{{field, fmt.Sprintf("only for algorithm concurrency, not %q", l.Algorithm)}}
	}
	var out [][2]string
	for field, set := range map[string]bool{"rate": l.Rate != 0, "period": l.Period != 0, "burst": l.Burst != 0, "no_delay": l.NoDelay, "align_windows": l.AlignWindows} {
		if set {
			out = append(out, [2]string{field, "not used by algorithm concurrency, which caps requests in flight (limit, lease_ttl)"})
		}
	}
	var fe *limiter.FieldError
	if err := l.Lease().Validate(); errors.As(err, &fe) {
		out = append(out, [2]string{fe.Field, fe.Err.Error()})
	} else if l.LeaseTTL > MaxHold {
		out = append(out, [2]string{"lease_ttl", fmt.Sprintf("must be at most %s, got %s: the proxy renews a lease while its request runs, so a TTL need only outlast a holder gone", MaxHold, l.LeaseTTL)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}

// validateCost checks cost_from, estimate and reserve of the class at key.
func (cl Class) validateCost(e *errs, key string) {
	if cl.CostFrom == nil {
		if cl.Estimate != nil {
			e.add(key+".estimate", "is read only with cost_from: set cost_from, or use cost for a fixed cost")
		}
		if cl.Reserve != (Reserve{}) {
			e.add(key+".reserve", "is read only with cost_from")
		}
		return
	}
	set := 0
	for field, v := range map[string]string{"header": cl.CostFrom.Header, "trailer": cl.CostFrom.Trailer, "json": cl.CostFrom.JSON} {
		if v == "" {
			continue
		}
		set++
		if field != "json" && !httplimit.ValidHeaderName(v) {
			e.add(key+".cost_from."+field, "%q is not a header name", v)
		}
	}
	if set != 1 {
		e.add(key+".cost_from", "set exactly one of header, trailer or json, got %d", set)
	}
	est := cl.estimate()
	if err := est.Validate(); err != nil {
		e.addField(key+".estimate", err)
	}
	if est.Header != "" && !httplimit.ValidHeaderName(est.Header) {
		e.add(key+".estimate.header", "%q is not a header name", est.Header)
	}
	if cl.Reserve.Hold < 0 {
		e.add(key+".reserve.hold", "must be >= 0, got %s", cl.Reserve.Hold)
	}
	if cl.Reserve.Hold > MaxHold {
		e.add(key+".reserve.hold", "must be at most %s, got %s: the proxy renews a reservation while its request runs, so a hold need only outlast a holder gone", MaxHold, cl.Reserve.Hold)
	}
	if _, err := limiter.ParseExpiryPolicy(cl.Reserve.OnExpiry); err != nil {
		e.add(key+".reserve.on_expiry", "%q: want charge or refund", cl.Reserve.OnExpiry)
	}
}

// algorithmNames are the names an algorithm key takes.
func algorithmNames() []string {
	var out []string
	for _, a := range limiter.AllAlgorithms() {
		out = append(out, string(a))
	}
	return append(out, string(limiter.Concurrency))
}
