package redistest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// SentinelMasterName is the name under which Sentinel monitors the primary.
const SentinelMasterName = "rlmaster"

// SentinelConfig describes a Sentinel setup to start. The zero value is a
// primary without replicas watched by one Sentinel that declares it down
// after 5 s.
type SentinelConfig struct {
	// Replicas is the number of replicas of the primary; with one, a
	// failover promotes it.
	Replicas int
	// DownAfter is down-after-milliseconds: how long the primary may not
	// answer before the Sentinel declares it down. Default 5 s.
	DownAfter time.Duration
	// FailoverTimeout is failover-timeout. Default 10 s.
	FailoverTimeout time.Duration
	// Sentinels is how many Sentinels watch the primary (quorum 1, so
	// that any of them may lead a failover). Default 1.
	Sentinels int
	// PrimaryArgs are extra redis-server arguments of the primary and of
	// every replica (a replica may be promoted): "--min-replicas-to-write",
	// "1", say.
	PrimaryArgs []string
}

// SentinelServers is a primary (and its replicas) watched by one or more
// Sentinels (quorum 1).
type SentinelServers struct {
	// Primary is the monitored redis-server as started.
	Primary *Server
	// Replicas are the primary's replicas as started.
	Replicas []*Server
	// Sentinels are the `redis-server --sentinel` processes.
	Sentinels []*Server
	// SentinelAddrs are the sentinels' "127.0.0.1:port" addresses, what a
	// failover client is given.
	SentinelAddrs []string
	// MasterName is the monitored master's name (SentinelMasterName).
	MasterName string
}

// Sentinel starts a primary and one Sentinel monitoring it, and waits until
// the Sentinel reports the primary's address for MasterName.
func Sentinel(t testing.TB) *SentinelServers {
	t.Helper()
	return SentinelWith(t, SentinelConfig{})
}

// SentinelWith starts the setup cfg describes: a primary, its replicas,
// and its Sentinels (`redis-server sentinel.conf --sentinel`; there is no
// separate redis-sentinel program) monitoring it with quorum 1. It waits
// until every Sentinel reports the primary for MasterName and the first
// knows every replica, so that a failover can start at once.
func SentinelWith(t testing.TB, cfg SentinelConfig) *SentinelServers {
	t.Helper()
	if cfg.DownAfter <= 0 {
		cfg.DownAfter = 5 * time.Second
	}
	if cfg.FailoverTimeout <= 0 {
		cfg.FailoverTimeout = 10 * time.Second
	}
	if cfg.Sentinels <= 0 {
		cfg.Sentinels = 1
	}
	// A replica's first sync starts at once, not after 5 s.
	primary := start(t, "redis", "", func(int) []string {
		return append([]string{"--repl-diskless-sync-delay", "0"}, cfg.PrimaryArgs...)
	})
	sn := &SentinelServers{Primary: primary, MasterName: SentinelMasterName}
	for i := 0; i < cfg.Replicas; i++ {
		r := start(t, "replica"+strconv.Itoa(i), "", func(int) []string {
			return append([]string{"--replicaof", "127.0.0.1", strconv.Itoa(primary.Port()), "--repl-diskless-sync-delay", "0"}, cfg.PrimaryArgs...)
		})
		sn.Replicas = append(sn.Replicas, r)
	}
	for _, r := range sn.Replicas {
		if err := waitLinkUp(r, 20*time.Second); err != nil {
			t.Fatalf("redistest: %v", err)
		}
	}
	if err := waitStreaming(primary, sn.Replicas, 20*time.Second); err != nil {
		t.Fatalf("redistest: %v", err)
	}
	for i := 0; i < cfg.Sentinels; i++ {
		sentinel := startSentinel(t, cfg, primary.Port())
		sn.Sentinels = append(sn.Sentinels, sentinel)
		sn.SentinelAddrs = append(sn.SentinelAddrs, sentinel.Addr())
	}
	for i := range sn.Sentinels {
		if _, err := sn.waitMasterOn(i, primary.Addr(), 10*time.Second); err != nil {
			t.Fatalf("redistest: %v", err)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for len(sn.Replicas) > 0 {
		n, err := sn.knownReplicas()
		if err == nil && n >= len(sn.Replicas) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: sentinel %s knows %d of %d replicas after 20s (%v)", sn.SentinelAddrs[0], n, len(sn.Replicas), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return sn
}

// startSentinel starts a Sentinel monitoring the primary on port.
func startSentinel(t testing.TB, cfg SentinelConfig, port int) *Server {
	t.Helper()
	conf := filepath.Join(t.TempDir(), "sentinel.conf")
	// Sentinel rewrites its config file, so it must be a writable file of
	// its own; the options below are the ones only a file can carry.
	body := fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d 1\n"+
		"sentinel down-after-milliseconds %s %d\n"+
		"sentinel failover-timeout %s %d\n",
		SentinelMasterName, port,
		SentinelMasterName, cfg.DownAfter.Milliseconds(),
		SentinelMasterName, cfg.FailoverTimeout.Milliseconds())
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		t.Fatalf("redistest: write %s: %v", conf, err)
	}
	return start(t, "sentinel", conf, func(int) []string { return []string{"--sentinel"} })
}

// waitLinkUp waits until replica r reports its link to the primary up.
func waitLinkUp(r *Server, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		info, err := r.Do("INFO", "replication")
		if s, _ := info.(string); err == nil && strings.Contains(s, "master_link_status:up") {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("replica %s: link to its primary not up after %s (%v)", r.Addr(), timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitStreaming waits until every replica holds a write made on primary:
// after a diskless first sync the primary streams its writes to a replica
// only once the replica's first acknowledgement came (up to a second after
// its link is up), and until then WAIT finds no replica acknowledging.
func waitStreaming(primary *Server, replicas []*Server, timeout time.Duration) error {
	const key = "redistest:streaming"
	deadline := time.Now().Add(timeout)
	for i := 0; ; i++ {
		value := strconv.Itoa(i)
		_, err := primary.Do("SET", key, value)
		streaming := err == nil
		for _, r := range replicas {
			if !streaming {
				break
			}
			got, gerr := r.Do("GET", key)
			streaming = gerr == nil && got == value
		}
		if streaming {
			_, err := primary.Do("DEL", key)
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("primary %s: its writes reach not every replica after %s (%v)", primary.Addr(), timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// knownReplicas is how many replicas the first Sentinel lists as healthy.
func (sn *SentinelServers) knownReplicas() (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	r, err := Do(ctx, sn.SentinelAddrs[0], "SENTINEL", "REPLICAS", sn.MasterName)
	if err != nil {
		return 0, err
	}
	rows, _ := r.([]any)
	n := 0
	for _, row := range rows {
		f, _ := row.([]any)
		for i := 0; i+1 < len(f); i += 2 {
			if f[i] == "flags" {
				if flags, _ := f[i+1].(string); flags == "slave" {
					n++
				}
			}
		}
	}
	return n, nil
}

// MasterAddr asks the first Sentinel for the master's address.
func (sn *SentinelServers) MasterAddr() (string, error) { return sn.masterAddrOn(0) }

// masterAddrOn asks Sentinel i for the master's address.
func (sn *SentinelServers) masterAddrOn(i int) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	r, err := Do(ctx, sn.SentinelAddrs[i], "SENTINEL", "get-master-addr-by-name", sn.MasterName)
	if err != nil {
		return "", err
	}
	parts, ok := r.([]any)
	if !ok || len(parts) != 2 {
		return "", fmt.Errorf("unexpected reply %v", r)
	}
	host, _ := parts[0].(string)
	port, _ := parts[1].(string)
	if _, err := strconv.Atoi(port); err != nil {
		return "", fmt.Errorf("unexpected port in reply %v", r)
	}
	return host + ":" + port, nil
}

// WaitMaster waits until the Sentinel reports want as the master's address
// (polling every 5 ms) and returns when it first did, or an error after
// timeout.
func (sn *SentinelServers) WaitMaster(want string, timeout time.Duration) (time.Time, error) {
	return sn.waitMasterOn(0, want, timeout)
}

// waitMasterOn is WaitMaster on Sentinel i.
func (sn *SentinelServers) waitMasterOn(i int, want string, timeout time.Duration) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	for {
		got, err := sn.masterAddrOn(i)
		if err == nil && got == want {
			return time.Now(), nil
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("sentinel %s does not report master %s at %s after %s (got %q, %v)",
				sn.SentinelAddrs[i], sn.MasterName, want, timeout, got, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// KillPrimary kills the primary (SIGKILL, as in a crash): the Sentinel
// declares it down after DownAfter and promotes a replica. It returns when
// the primary's port refuses connections.
func (sn *SentinelServers) KillPrimary() time.Time {
	sn.Primary.Stop()
	return time.Now()
}

// Failover asks the Sentinel for a failover now (SENTINEL FAILOVER), with
// the primary still running: it promotes a replica and makes the old
// primary its replica. WaitMaster sees the switch.
func (sn *SentinelServers) Failover() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := Do(ctx, sn.SentinelAddrs[0], "SENTINEL", "FAILOVER", sn.MasterName); err != nil {
		return fmt.Errorf("SENTINEL FAILOVER %s: %w", sn.MasterName, err)
	}
	return nil
}
