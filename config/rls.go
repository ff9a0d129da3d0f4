package config

import (
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"time"
)

// RLS configures Envoy's rate limit service (envoy.service.ratelimit.v3),
// served on server.grpc_listen. The descriptors and their limits are read
// from ConfigDir in envoyproxy/ratelimit's YAML format, one file per domain.
type RLS struct {
	// ConfigDir is the directory of the domain files (*.yaml, *.yml);
	// required when server.grpc_listen is set. Watched when reload.watch is
	// true: an invalid directory leaves the rules in force.
	ConfigDir string `koanf:"config_dir"`
	// TierDescriptorKey names the descriptor entry whose value is the plan
	// tier of the decision (its metrics label, and the live limits that
	// apply to it); a value that is not one of tiers.names, or no such
	// entry, counts as tiers.default.
	TierDescriptorKey string `koanf:"tier_descriptor_key"`
	// ResponseHeaders adds the rate-limit headers selected under headers.*
	// to every answer's response_headers_to_add, for Envoy to pass to the
	// client. Default true.
	ResponseHeaders bool `koanf:"response_headers"`
	// MaxDescriptors is the most descriptors a request may carry, and
	// MaxEntries the most entries a descriptor may; a request with more is
	// answered INVALID_ARGUMENT. Defaults 32 and 16.
	MaxDescriptors int `koanf:"max_descriptors"`
	MaxEntries     int `koanf:"max_entries"`
	// MaxOverrides is the most limit overrides (a descriptor's own limit)
	// kept compiled, the least recently used dropped first. Default 1000.
	MaxOverrides int `koanf:"max_overrides"`
	// MaxConcurrentStreams is the most calls in flight on one connection;
	// a client waits for more. Default 100.
	MaxConcurrentStreams int `koanf:"max_concurrent_streams"`
	// KeepaliveMinTime is the least time between a client's pings; a
	// client pinging more often is sent GOAWAY. Default 10s.
	KeepaliveMinTime time.Duration `koanf:"keepalive_min_time"`
	// KeepalivePermitWithoutStream lets clients ping a connection with no
	// call in flight, as Envoy's connection keepalive does. Default true.
	KeepalivePermitWithoutStream bool `koanf:"keepalive_permit_without_stream"`
	// MaxConnectionIdle closes a connection that has had no call in flight
	// for this long (GOAWAY; Envoy reconnects on its next call). Default 5m.
	MaxConnectionIdle time.Duration `koanf:"max_connection_idle"`
	// AllOrNothing decides a call's descriptors as one: the call is OK only
	// when every descriptor's limit admits it, and a refused call takes from
	// none (rls.Config.AllOrNothing). Default false: each descriptor is
	// decided and counted on its own, as envoyproxy/ratelimit does, so a
	// call one descriptor refuses has been counted by the others.
	AllOrNothing bool `koanf:"all_or_nothing"`
}

// GRPCTLS configures TLS on server.grpc_listen: a certificate and key, and
// optionally a client CA that every client must present a certificate of.
type GRPCTLS struct {
	// CertFile and KeyFile hold the PEM server certificate and key.
	CertFile string `koanf:"cert_file"`
	KeyFile  string `koanf:"key_file"`
	// ClientCAFile, when set, holds the PEM CAs client certificates are
	// verified with; clients without a valid certificate are refused.
	ClientCAFile string `koanf:"client_ca_file"`
}

// GRPCTLSConfig builds the TLS configuration of server.grpc_tls, reading
// its files; nil when TLS is not configured.
func (c *Config) GRPCTLSConfig() (*tls.Config, error) {
	t := c.Server.GRPCTLS
	if t.CertFile == "" && t.KeyFile == "" && t.ClientCAFile == "" {
		return nil, nil
	}
	if t.CertFile == "" || t.KeyFile == "" {
		return nil, errors.New("cert_file and key_file: both are required for TLS")
	}
	cert, err := tls.LoadX509KeyPair(c.Path(t.CertFile), c.Path(t.KeyFile))
	if err != nil {
		return nil, fmt.Errorf("cert_file/key_file: %w", err)
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	if t.ClientCAFile != "" {
		pool, err := c.caPool("client_ca_file", t.ClientCAFile)
		if err != nil {
			return nil, err
		}
		tc.ClientCAs = pool
		tc.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return tc, nil
}

// RLSConfigDir is rls.config_dir resolved against the config file's directory.
func (c *Config) RLSConfigDir() string { return c.Path(c.RLS.ConfigDir) }

func (c *Config) validateRLS(e *errs) {
	r := c.RLS
	for _, n := range []struct {
		key string
		v   int
	}{
		{"rls.max_descriptors", r.MaxDescriptors}, {"rls.max_entries", r.MaxEntries}, {"rls.max_overrides", r.MaxOverrides},
	} {
		if n.v < 1 {
			e.add(n.key, "must be >= 1, got %d", n.v)
		}
	}
	if r.MaxConcurrentStreams < 1 || r.MaxConcurrentStreams > math.MaxInt32 {
		e.add("rls.max_concurrent_streams", "must be 1 to %d, got %d", math.MaxInt32, r.MaxConcurrentStreams)
	}
	if r.KeepaliveMinTime <= 0 {
		e.add("rls.keepalive_min_time", "must be > 0, got %s", r.KeepaliveMinTime)
	}
	if r.MaxConnectionIdle <= 0 {
		e.add("rls.max_connection_idle", "must be > 0, got %s", r.MaxConnectionIdle)
	}
	s := c.Server
	if s.GRPCListen == "" {
		if s.GRPCTLS != (GRPCTLS{}) {
			e.add("server.grpc_tls", "set, but server.grpc_listen is not")
		}
		return
	}
	if err := validAddr(s.GRPCListen); err != nil {
		e.add("server.grpc_listen", "%q is not host:port: %v", s.GRPCListen, err)
	} else if !strings.HasSuffix(s.GRPCListen, ":0") {
		for _, other := range []struct{ key, addr string }{
			{"server.listen", s.Listen}, {"server.metrics_listen", s.MetricsListen}, {"server.admin_listen", s.AdminListen},
			{"server.auth_listen", s.AuthListen},
		} {
			if other.addr == s.GRPCListen {
				e.add("server.grpc_listen", "%q is already %s", s.GRPCListen, other.key)
			}
		}
	}
	if _, err := c.GRPCTLSConfig(); err != nil {
		e.add("server.grpc_tls", "%v", err)
	}
	if c.RLS.ConfigDir == "" {
		e.add("rls.config_dir", "required when server.grpc_listen is set: the directory of the rate limit domain files")
	} else if fi, err := os.Stat(c.RLSConfigDir()); err != nil {
		e.add("rls.config_dir", "%v", err)
	} else if !fi.IsDir() {
		e.add("rls.config_dir", "%s is not a directory", c.RLSConfigDir())
	}
}
