package redisstore

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"time"

	"github.com/redis/go-redis/v9"
)

// Defaults of ClientConfig.
const (
	DefaultDialTimeout  = time.Second
	DefaultReadTimeout  = 500 * time.Millisecond
	DefaultWriteTimeout = 500 * time.Millisecond
	// DefaultDialAttempts: a refused connection fails at once, not at the deadline.
	DefaultDialAttempts          = 1
	DefaultDialRetryBackoff      = 10 * time.Millisecond
	DefaultClusterMaxRedirects   = 3
	DefaultClusterReloadInterval = 60 * time.Second
)

// clusterRetryBackoff is the first pause before resending an unsent Cluster call (doubled up to 4×).
const clusterRetryBackoff = time.Millisecond

// ClientConfig describes how to reach Redis: set exactly one of URL, ClusterAddrs or
// SentinelAddrs with MasterName. It is a plain value.
type ClientConfig struct {
	// URL is a single server: redis[s]://[user:password@]host:port[/db]; its go-redis query
	// options (pool_size=, ...) apply where the fields below are zero.
	URL string
	// ClusterAddrs are seed addresses ("host:port") of a Redis Cluster.
	ClusterAddrs []string
	// SentinelAddrs ("host:port") require MasterName, the monitored primary's name.
	SentinelAddrs []string
	MasterName    string
	// SentinelPassword authenticates to the Sentinels, when they need it.
	SentinelPassword string
	// Username and Password, when set, override the URL's.
	Username string
	Password string
	// DB is the database number (not with ClusterAddrs); overrides the URL's when > 0.
	DB int
	// TLS, when set, makes every connection use TLS with this configuration.
	TLS *tls.Config
	// PoolSize is the connections per node. Default 10 × GOMAXPROCS.
	PoolSize int
	// DialTimeout bounds connecting. Default DefaultDialTimeout.
	DialTimeout time.Duration
	// ReadTimeout and WriteTimeout bound socket I/O unless the context's deadline is earlier.
	ReadTimeout  time.Duration
	WriteTimeout time.Duration
	// MaxRetries is go-redis's retries of a call failed on the network. Default 0: a
	// decision whose reply was lost may have run; the Limiter's fail policy handles it.
	MaxRetries int
	// DialAttempts is how many times a connection is dialled within the call's deadline.
	DialAttempts int
	// DialRetryBackoff is the pause between two dial attempts.
	DialRetryBackoff time.Duration
	// ClusterMaxRedirects is how many MOVED or ASK redirections a call follows; negative: none.
	ClusterMaxRedirects int
	// ClusterReloadInterval is how often a Cluster client reloads its slot map on its own.
	ClusterReloadInterval time.Duration
	// Logger, with SentinelAddrs, is told of each failover's window (nil: slog.Default()).
	Logger *slog.Logger
}

// Options returns the go-redis options c describes, defaults applied.
func (c ClientConfig) Options() (*redis.UniversalOptions, error) {
	if err := c.checkTarget(); err != nil {
		return nil, err
	}
	o := c.baseOptions()
	var err error
	switch {
	case c.URL != "":
		err = applyURL(o, c.URL)
	case len(c.ClusterAddrs) > 0:
		err = c.applyCluster(o)
	default:
		err = c.applySentinel(o)
	}
	if err != nil {
		return nil, err
	}
	for _, a := range o.Addrs {
		if a == "" {
			return nil, errors.New("redis: empty address")
		}
	}
	if c.MasterName != "" && len(c.SentinelAddrs) == 0 {
		return nil, errors.New("redis: master name is set but no sentinel addresses")
	}
	if err := c.applyDefaults(o); err != nil {
		return nil, err
	}
	return o, nil
}

func (c ClientConfig) checkTarget() error {
	set := 0
	for _, b := range []bool{c.URL != "", len(c.ClusterAddrs) > 0, len(c.SentinelAddrs) > 0} {
		if b {
			set++
		}
	}
	if set != 1 {
		return errors.New("redis: set exactly one of url, cluster addresses or sentinel addresses")
	}
	return nil
}

func (c ClientConfig) baseOptions() *redis.UniversalOptions {
	return &redis.UniversalOptions{
		Username:         c.Username,
		Password:         c.Password,
		DB:               c.DB,
		TLSConfig:        c.TLS,
		PoolSize:         c.PoolSize,
		DialTimeout:      c.DialTimeout,
		ReadTimeout:      c.ReadTimeout,
		WriteTimeout:     c.WriteTimeout,
		MaxRetries:       c.MaxRetries,
		MaxRedirects:     c.ClusterMaxRedirects,
		DialerRetries:    c.DialAttempts,
		SentinelPassword: c.SentinelPassword,
		// The Limiter's deadline bounds socket I/O too.
		ContextTimeoutEnabled: true,
		// RESP2: on RESP3 go-redis peeks at the socket for push
		// notifications, a system call per command.
		Protocol: 2,
	}
}

// applyURL sets what the URL says and o leaves at zero.
func applyURL(o *redis.UniversalOptions, url string) error {
	u, err := ParseURL(url)
	if err != nil {
		return fmt.Errorf("redis url: %w", err)
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
	return nil
}

func (c ClientConfig) applyCluster(o *redis.UniversalOptions) error {
	if c.DB != 0 {
		return fmt.Errorf("redis cluster: db must be 0, got %d", c.DB)
	}
	o.Addrs = c.ClusterAddrs
	o.IsClusterMode = true
	// go-redis's own pause (10 ms to 1 s) outlasts a decision's deadline.
	o.MinRetryBackoff = clusterRetryBackoff
	o.MaxRetryBackoff = 4 * clusterRetryBackoff
	return nil
}

func (c ClientConfig) applySentinel(o *redis.UniversalOptions) error {
	if c.MasterName == "" {
		return errors.New("redis sentinel: master name is required with sentinel addresses")
	}
	o.Addrs = c.SentinelAddrs
	o.MasterName = c.MasterName
	return nil
}

func (c ClientConfig) applyDefaults(o *redis.UniversalOptions) error {
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
	if c.DialAttempts < 0 {
		return fmt.Errorf("redis: dial attempts must be >= 1, got %d", c.DialAttempts)
	}
	if o.DialerRetries == 0 {
		o.DialerRetries = DefaultDialAttempts // go-redis: attempts in all, 0 means 5
	}
	o.DialerRetryTimeout = c.DialRetryBackoff
	if o.DialerRetryTimeout <= 0 {
		o.DialerRetryTimeout = DefaultDialRetryBackoff
	}
	switch {
	case c.ClusterMaxRedirects == 0:
		o.MaxRedirects = DefaultClusterMaxRedirects
	case c.ClusterMaxRedirects < 0:
		o.MaxRedirects = -1 // go-redis: -1 is none, 0 its default of 3
	}
	return nil
}

// NewClient returns a go-redis client for c, which the caller closes. No Redis call.
func (c ClientConfig) NewClient() (redis.UniversalClient, error) {
	o, err := c.Options()
	if err != nil {
		return nil, err
	}
	if o.IsClusterMode {
		co := o.Cluster()
		co.ClusterStateReloadInterval = c.ClusterReloadInterval
		if co.ClusterStateReloadInterval <= 0 {
			co.ClusterStateReloadInterval = DefaultClusterReloadInterval
		}
		return redis.NewClusterClient(co), nil
	}
	if o.MasterName != "" {
		return c.newFailoverClient(o), nil
	}
	return redis.NewUniversalClient(o), nil
}

// FailoverClient is the client NewClient returns for a Sentinel-managed
// primary: go-redis's failover client, whose connections a fence keeps off
// a primary being demoted (fence.go). Safe for concurrent use.
type FailoverClient struct {
	*redis.Client
	fence *fence
}

// Close stops following the Sentinels and closes the client.
func (c *FailoverClient) Close() error {
	c.fence.close()
	return c.Client.Close()
}

func (c ClientConfig) newFailoverClient(o *redis.UniversalOptions) *FailoverClient {
	fo := o.Failover()
	sent := redis.Options{
		Password: o.SentinelPassword, TLSConfig: o.TLSConfig, Protocol: 2,
		DialTimeout: o.DialTimeout, ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout,
	}
	data := redis.Options{
		Username: o.Username, Password: o.Password, TLSConfig: o.TLSConfig, Protocol: 2,
		DialTimeout: o.DialTimeout, ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout,
	}
	f := newFence(o.MasterName, o.Addrs, sent, data, c.Logger)
	cl := redis.NewFailoverClient(fo)
	cl.AddHook(fenceHook{f})
	return &FailoverClient{Client: cl, fence: f}
}
