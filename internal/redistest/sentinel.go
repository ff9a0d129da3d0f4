package redistest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// SentinelMasterName is the name under which Sentinel monitors the primary.
const SentinelMasterName = "rlmaster"

// SentinelServers is a primary watched by one Sentinel (quorum 1).
type SentinelServers struct {
	// Primary is the monitored redis-server.
	Primary *Server
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
	primary := Single(t)
	dir := t.TempDir()
	conf := filepath.Join(dir, "sentinel.conf")
	// Sentinel rewrites its config file, so it must be a writable file of
	// its own; the options below are the ones only a file can carry.
	body := fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d 1\n"+
		"sentinel down-after-milliseconds %s 5000\n"+
		"sentinel failover-timeout %s 10000\n",
		SentinelMasterName, primary.Port(), SentinelMasterName, SentinelMasterName)
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		t.Fatalf("redistest: write %s: %v", conf, err)
	}
	sentinel := start(t, "sentinel", conf, func(int) []string { return []string{"--sentinel"} })
	sn := &SentinelServers{
		Primary:       primary,
		Sentinels:     []*Server{sentinel},
		SentinelAddrs: []string{sentinel.Addr()},
		MasterName:    SentinelMasterName,
	}
	want := primary.Addr()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := sn.MasterAddr()
		if err == nil && got == want {
			return sn
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: sentinel %s does not report master %s at %s (got %q, %v)",
				sentinel.Addr(), SentinelMasterName, want, got, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// MasterAddr asks the first Sentinel for the master's address.
func (sn *SentinelServers) MasterAddr() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	r, err := Do(ctx, sn.SentinelAddrs[0], "SENTINEL", "get-master-addr-by-name", sn.MasterName)
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
