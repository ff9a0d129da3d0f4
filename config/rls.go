package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
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
		b, err := os.ReadFile(c.Path(t.ClientCAFile))
		if err != nil {
			return nil, fmt.Errorf("client_ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("client_ca_file: %s holds no PEM certificate", t.ClientCAFile)
		}
		tc.ClientCAs = pool
		tc.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return tc, nil
}

// RLSConfigDir is rls.config_dir resolved against the config file's directory.
func (c *Config) RLSConfigDir() string { return c.Path(c.RLS.ConfigDir) }

func (c *Config) validateRLS(e *errs) {
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
