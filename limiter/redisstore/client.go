package redisstore

import (
	"crypto/tls"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/redis/go-redis/v9"
)

// Defaults of ClientConfig.
const (
	DefaultDialTimeout  = time.Second
	DefaultReadTimeout  = 500 * time.Millisecond
	DefaultWriteTimeout = 500 * time.Millisecond
)

// ClientConfig describes how to reach Redis. Set exactly one of URL (a
// single server), ClusterAddrs (Redis Cluster) or SentinelAddrs with
// MasterName (a primary found through Sentinel). It is a plain value.
type ClientConfig struct {
	// URL is a single server: redis://[user:password@]host:port[/db], or
	// rediss:// for TLS. go-redis query options (pool_size=, ...) apply
	// where the fields below are zero.
	URL string
	// ClusterAddrs are seed addresses ("host:port") of a Redis Cluster.
	ClusterAddrs []string
	// SentinelAddrs are Sentinel addresses ("host:port"); MasterName is the
	// name of the monitored primary, required with them.
	SentinelAddrs []string
	MasterName    string
	// SentinelPassword authenticates to the Sentinels, when they need it.
	SentinelPassword string
	// Username and Password authenticate to Redis; when set they override
	// the URL's.
	Username string
	Password string
	// DB is the database number (not with ClusterAddrs); overrides the URL's when > 0.
	DB int
	// TLS, when set, makes every connection use TLS with this configuration.
	TLS *tls.Config
	// PoolSize is the number of connections per Redis node. Default
	// 10 × GOMAXPROCS.
	PoolSize int
	// DialTimeout bounds connecting. Default DefaultDialTimeout.
	DialTimeout time.Duration
	// ReadTimeout and WriteTimeout bound socket reads and writes of a call
	// whose context has no earlier deadline. Defaults DefaultReadTimeout,
	// DefaultWriteTimeout. The Limiter's per-call deadline (100 ms by
	// default) is shorter and applies to the socket because the client is
	// built with ContextTimeoutEnabled.
	ReadTimeout  time.Duration
	WriteTimeout time.Duration
	// MaxRetries is how many times go-redis retries a call that failed on
	// the network. Default 0: a decision is not idempotent, and retrying one
	// whose reply was lost could count a request twice; the Limiter's fail
	// policy handles the failure instead.
	MaxRetries int
}

// Options returns the go-redis options ClientConfig describes, with the
// defaults applied and ContextTimeoutEnabled set.
func (c ClientConfig) Options() (*redis.UniversalOptions, error) {
	set := 0
	for _, b := range []bool{c.URL != "", len(c.ClusterAddrs) > 0, len(c.SentinelAddrs) > 0} {
		if b {
			set++
		}
	}
	if set != 1 {
		return nil, errors.New("redis: set exactly one of url, cluster addresses or sentinel addresses")
	}
	o := &redis.UniversalOptions{
		Username:         c.Username,
		Password:         c.Password,
		DB:               c.DB,
		TLSConfig:        c.TLS,
		PoolSize:         c.PoolSize,
		DialTimeout:      c.DialTimeout,
		ReadTimeout:      c.ReadTimeout,
		WriteTimeout:     c.WriteTimeout,
		MaxRetries:       c.MaxRetries,
		SentinelPassword: c.SentinelPassword,
		// The Limiter's deadline must bound socket I/O, not only the wait
		// for a pooled connection.
		ContextTimeoutEnabled: true,
		// RESP2: on RESP3 go-redis peeks at the socket for push
		// notifications before commands (a system call each), which the
		// store's scripts never need.
		Protocol: 2,
	}
	switch {
	case c.URL != "":
		u, err := redis.ParseURL(c.URL)
		if err != nil {
			return nil, fmt.Errorf("redis url: %w", err)
		}
		o.Addrs = []string{u.Addr}
		if o.Username == "" {
			o.Username = u.Username
		}
		if o.Password == "" {
			o.Password = u.Password
		}
		if o.DB == 0 {
			o.DB = u.DB
		}
		if o.TLSConfig == nil {
			o.TLSConfig = u.TLSConfig
		}
		if o.PoolSize == 0 {
			o.PoolSize = u.PoolSize
		}
		if o.DialTimeout == 0 {
			o.DialTimeout = u.DialTimeout
		}
		if o.ReadTimeout == 0 {
			o.ReadTimeout = u.ReadTimeout
		}
		if o.WriteTimeout == 0 {
			o.WriteTimeout = u.WriteTimeout
		}
		if u.Protocol != 0 {
			o.Protocol = u.Protocol // protocol=3 in the URL
		}
	case len(c.ClusterAddrs) > 0:
		if c.DB != 0 {
			return nil, fmt.Errorf("redis cluster: db must be 0, got %d", c.DB)
		}
		o.Addrs = c.ClusterAddrs
		o.IsClusterMode = true
	default:
		if c.MasterName == "" {
			return nil, errors.New("redis sentinel: master name is required with sentinel addresses")
		}
		o.Addrs = c.SentinelAddrs
		o.MasterName = c.MasterName
	}
	for _, a := range o.Addrs {
		if a == "" {
			return nil, errors.New("redis: empty address")
		}
	}
	if c.MasterName != "" && len(c.SentinelAddrs) == 0 {
		return nil, errors.New("redis: master name is set but no sentinel addresses")
	}
	if o.PoolSize <= 0 {
		o.PoolSize = 10 * runtime.GOMAXPROCS(0)
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = DefaultDialTimeout
	}
	if o.ReadTimeout <= 0 {
		o.ReadTimeout = DefaultReadTimeout
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = DefaultWriteTimeout
	}
	if o.MaxRetries == 0 {
		o.MaxRetries = -1 // go-redis: -1 disables retries, 0 means its default of 3
	}
	return o, nil
}

// NewClient returns a go-redis client for c: a *redis.Client, a failover
// client or a *redis.ClusterClient. It does not contact Redis. The caller
// closes it.
func (c ClientConfig) NewClient() (redis.UniversalClient, error) {
	o, err := c.Options()
	if err != nil {
		return nil, err
	}
	return redis.NewUniversalClient(o), nil
}
