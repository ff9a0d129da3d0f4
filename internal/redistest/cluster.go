package redistest

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// ClusterServers is a running Redis Cluster of masters without replicas.
type ClusterServers struct {
	// Addrs are the masters' "127.0.0.1:port" addresses, the seed list for
	// a cluster client.
	Addrs []string
	// Nodes are the masters' processes, in the order of Addrs.
	Nodes []*Server
}

// Cluster starts masters redis-server processes in cluster mode (at least
// 3, as Redis Cluster requires), joins them with `redis-cli --cluster
// create`, and waits until every node reports cluster_state:ok.
func Cluster(t testing.TB, masters int) *ClusterServers {
	t.Helper()
	if masters < 3 {
		t.Fatalf("redistest: a Redis Cluster needs at least 3 masters, got %d", masters)
	}
	cli := lookPath(t, "redis-cli")
	c := &ClusterServers{}
	for i := 0; i < masters; i++ {
		s := start(t, "node"+strconv.Itoa(i), "", func(port int) []string {
			bus, err := freePort()
			for err == nil && bus == port {
				bus, err = freePort()
			}
			if err != nil {
				t.Fatalf("redistest: find a free cluster bus port: %v", err)
			}
			return []string{
				"--cluster-enabled", "yes",
				"--cluster-config-file", "nodes-" + strconv.Itoa(port) + ".conf",
				"--cluster-node-timeout", "3000",
				"--cluster-port", strconv.Itoa(bus),
			}
		})
		c.Nodes = append(c.Nodes, s)
		c.Addrs = append(c.Addrs, s.Addr())
	}
	args := append([]string{"--cluster", "create"}, c.Addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("redistest: redis-cli --cluster create %s: %v\n%s", strings.Join(c.Addrs, " "), err, out)
	}
	if err := c.WaitOK(20 * time.Second); err != nil {
		t.Fatalf("redistest: %v", err)
	}
	return c
}

// WaitOK waits until every node reports cluster_state:ok and knows all the
// others, or returns an error after timeout.
func (c *ClusterServers) WaitOK(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		bad := ""
		for _, addr := range c.Addrs {
			if state := clusterState(addr, len(c.Addrs)); state != "" {
				bad = addr + ": " + state
				break
			}
		}
		if bad == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cluster not ready after %s: %s", timeout, bad)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// clusterState returns "" when addr reports cluster_state:ok, all 16384
// slots assigned and n known nodes; otherwise what is missing.
func clusterState(addr string, n int) string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	r, err := Do(ctx, addr, "CLUSTER", "INFO")
	if err != nil {
		return err.Error()
	}
	info, _ := r.(string)
	want := []string{"cluster_state:ok", "cluster_slots_ok:16384", "cluster_known_nodes:" + strconv.Itoa(n)}
	for _, w := range want {
		if !strings.Contains(info, w+"\r\n") && !strings.HasSuffix(info, w) {
			return "no " + w
		}
	}
	return ""
}

// KeySlot asks the cluster which hash slot key maps to (CLUSTER KEYSLOT).
func (c *ClusterServers) KeySlot(key string) (int64, error) {
	r, err := c.Nodes[0].Do("CLUSTER", "KEYSLOT", key)
	if err != nil {
		return 0, err
	}
	n, ok := r.(int64)
	if !ok {
		return 0, fmt.Errorf("CLUSTER KEYSLOT %q: unexpected reply %T", key, r)
	}
	return n, nil
}
