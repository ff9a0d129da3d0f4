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

// DefaultClusterNodeTimeout is the cluster-node-timeout of a Cluster
// started without one: how long a master may be unreachable before the
// others mark it failed.
const DefaultClusterNodeTimeout = 3 * time.Second

// ClusterConfig describes a Redis Cluster to start. The zero value is 3
// masters without replicas.
type ClusterConfig struct {
	// Masters is the number of masters, at least 3 (Redis Cluster's
	// minimum). Default 3.
	Masters int
	// Replicas gives every master this many replicas (0 or more). With a
	// replica, killing a master makes the cluster promote it.
	Replicas int
	// NodeTimeout is cluster-node-timeout. Default DefaultClusterNodeTimeout.
	NodeTimeout time.Duration
	// PartialCoverage sets cluster-require-full-coverage no: while some
	// slots have no reachable owner, the other masters keep serving theirs
	// instead of answering CLUSTERDOWN.
	PartialCoverage bool
}

// ClusterServers is a running Redis Cluster.
type ClusterServers struct {
	// Addrs are the masters' "127.0.0.1:port" addresses as started, the
	// seed list for a cluster client.
	Addrs []string
	// Nodes are the masters' processes as started, in the order of Addrs.
	Nodes []*Server
	// Replicas holds, for master i, its replicas' processes (empty without
	// replicas). Replicas[i][0] is the one promoted when Nodes[i] dies.
	Replicas [][]*Server

	ids   map[*Server]string // cluster node id by process
	slots [][2]int           // slot ranges [first, last] of Nodes[i] at start, by i
	owner []int              // the index in Nodes of each slot's master at start
}

// Cluster starts masters redis-server processes in cluster mode (at least
// 3, as Redis Cluster requires) without replicas, joins them with
// `redis-cli --cluster create`, and waits until every node reports
// cluster_state:ok.
func Cluster(t testing.TB, masters int) *ClusterServers {
	t.Helper()
	return ClusterWith(t, ClusterConfig{Masters: masters})
}

// ClusterWith starts the cluster cfg describes: masters joined with
// `redis-cli --cluster create`, then each master's replicas attached to it
// (CLUSTER MEET, CLUSTER REPLICATE), and waits until every node reports
// cluster_state:ok, knows every other node, and every replica's link to
// its master is up.
func ClusterWith(t testing.TB, cfg ClusterConfig) *ClusterServers {
	t.Helper()
	if cfg.Masters == 0 {
		cfg.Masters = 3
	}
	if cfg.Masters < 3 {
		t.Fatalf("redistest: a Redis Cluster needs at least 3 masters, got %d", cfg.Masters)
	}
	if cfg.Replicas < 0 {
		t.Fatalf("redistest: replicas per master must be >= 0, got %d", cfg.Replicas)
	}
	if cfg.NodeTimeout <= 0 {
		cfg.NodeTimeout = DefaultClusterNodeTimeout
	}
	cli := lookPath(t, "redis-cli")
	c := &ClusterServers{ids: map[*Server]string{}}
	startNode := func(name string) *Server { return startClusterNode(t, name, cfg) }
	for i := 0; i < cfg.Masters; i++ {
		s := startNode("node" + strconv.Itoa(i))
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
	for _, s := range c.Nodes {
		id, err := nodeID(s)
		if err != nil {
			t.Fatalf("redistest: %v", err)
		}
		c.ids[s] = id
	}
	c.Replicas = make([][]*Server, cfg.Masters)
	for i, m := range c.Nodes {
		for j := 0; j < cfg.Replicas; j++ {
			r := startNode("node" + strconv.Itoa(i) + "-replica" + strconv.Itoa(j))
			if err := c.attachReplica(r, m); err != nil {
				t.Fatalf("redistest: %v", err)
			}
			c.Replicas[i] = append(c.Replicas[i], r)
		}
	}
	if err := c.WaitOK(30 * time.Second); err != nil {
		t.Fatalf("redistest: %v", err)
	}
	if err := c.loadSlots(); err != nil {
		t.Fatalf("redistest: %v", err)
	}
	return c
}

// startClusterNode starts one cluster-enabled redis-server, its bus on a
// free port of its own.
func startClusterNode(t testing.TB, name string, cfg ClusterConfig) *Server {
	return start(t, name, "", func(port int) []string {
		bus, err := freePort()
		for err == nil && bus == port {
			bus, err = freePort()
		}
		if err != nil {
			t.Fatalf("redistest: find a free cluster bus port: %v", err)
		}
		args := []string{
			"--cluster-enabled", "yes",
			"--cluster-config-file", "nodes-" + strconv.Itoa(port) + ".conf",
			"--cluster-node-timeout", strconv.FormatInt(cfg.NodeTimeout.Milliseconds(), 10),
			"--cluster-port", strconv.Itoa(bus),
			// A replica's first sync starts at once, not after 5 s.
			"--repl-diskless-sync-delay", "0",
		}
		if cfg.PartialCoverage {
			args = append(args, "--cluster-require-full-coverage", "no")
		}
		if cfg.Replicas > 0 {
			// A replica whose link just broke may be promoted at once.
			args = append(args, "--cluster-replica-validity-factor", "0")
		}
		return args
	})
}

// attachReplica makes r a replica of master m and waits until its
// replication link is up.
func (c *ClusterServers) attachReplica(r, m *Server) error {
	if _, err := r.Do("CLUSTER", "MEET", "127.0.0.1", strconv.Itoa(m.Port()), m.arg("--cluster-port")); err != nil {
		return fmt.Errorf("CLUSTER MEET from %s to %s: %w", r.Addr(), m.Addr(), err)
	}
	id := c.ids[m]
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := r.Do("CLUSTER", "REPLICATE", id)
		if err == nil {
			break
		}
		// The replica learns the master's id through the cluster bus.
		if time.Now().After(deadline) {
			return fmt.Errorf("CLUSTER REPLICATE %s on %s: %w", id, r.Addr(), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	rid, err := nodeID(r)
	if err != nil {
		return err
	}
	c.ids[r] = rid
	for {
		info, err := r.Do("INFO", "replication")
		if s, _ := info.(string); err == nil && strings.Contains(s, "master_link_status:up") {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("replica %s of %s: link not up after 20s (%v)", r.Addr(), m.Addr(), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// nodeID is s's cluster node id (CLUSTER MYID).
func nodeID(s *Server) (string, error) {
	r, err := s.Do("CLUSTER", "MYID")
	if err != nil {
		return "", fmt.Errorf("CLUSTER MYID on %s: %w", s.Addr(), err)
	}
	id, _ := r.(string)
	if id == "" {
		return "", fmt.Errorf("CLUSTER MYID on %s: unexpected reply %v", s.Addr(), r)
	}
	return id, nil
}

// all is every running-or-not process of the cluster: masters, then replicas.
func (c *ClusterServers) all() []*Server {
	out := append([]*Server(nil), c.Nodes...)
	for _, rs := range c.Replicas {
		out = append(out, rs...)
	}
	return out
}

// loadSlots records which master owns which slots (CLUSTER SLOTS).
func (c *ClusterServers) loadSlots() error {
	r, err := c.Nodes[0].Do("CLUSTER", "SLOTS")
	if err != nil {
		return fmt.Errorf("CLUSTER SLOTS: %w", err)
	}
	rows, _ := r.([]any)
	c.owner = make([]int, 16384)
	for i := range c.owner {
		c.owner[i] = -1
	}
	c.slots = nil
	for _, row := range rows {
		f, _ := row.([]any)
		if len(f) < 3 {
			return fmt.Errorf("CLUSTER SLOTS: unexpected row %v", row)
		}
		lo, _ := f[0].(int64)
		hi, _ := f[1].(int64)
		node, _ := f[2].([]any)
		if len(node) < 2 {
			return fmt.Errorf("CLUSTER SLOTS: unexpected node %v", f[2])
		}
		port, _ := node[1].(int64)
		idx := -1
		for i, s := range c.Nodes {
			if int64(s.Port()) == port {
				idx = i
			}
		}
		if idx < 0 {
			return fmt.Errorf("CLUSTER SLOTS: slots %d-%d on unknown port %d", lo, hi, port)
		}
		for s := lo; s <= hi; s++ {
			c.owner[s] = idx
		}
	}
	for s, o := range c.owner {
		if o < 0 {
			return fmt.Errorf("CLUSTER SLOTS: slot %d has no master", s)
		}
	}
	return nil
}

// OwnerAtStart is the index in Nodes of the master that held slot when
// the cluster started, or -1 for a slot out of range.
func (c *ClusterServers) OwnerAtStart(slot int) int {
	if slot < 0 || slot >= len(c.owner) {
		return -1
	}
	return c.owner[slot]
}

// WaitOK waits until every running node reports cluster_state:ok and knows
// all the others, or returns an error after timeout.
func (c *ClusterServers) WaitOK(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	all := c.all()
	for {
		bad := ""
		for _, s := range all {
			if !s.Running() {
				continue
			}
			if state := clusterState(s.Addr(), len(all)); state != "" {
				bad = s.Addr() + ": " + state
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

// KillMaster kills master i (SIGKILL, as in a crash) and returns when its
// port refuses connections. With a replica, the cluster promotes it once
// the other masters agree the master failed (after NodeTimeout and a
// little more); WaitPromoted sees that.
func (c *ClusterServers) KillMaster(i int) time.Time {
	c.Nodes[i].Stop()
	return time.Now()
}

// WaitPromoted waits until master i's first replica reports itself a
// master and every running master (and the promoted replica) reports
// cluster_state:ok with the replica serving master i's former slots. It
// returns when it saw the replica turn master (polling every 5 ms), and
// an error after timeout.
func (c *ClusterServers) WaitPromoted(i int, timeout time.Duration) (time.Time, error) {
	if len(c.Replicas[i]) == 0 {
		return time.Time{}, fmt.Errorf("master %d has no replica", i)
	}
	r := c.Replicas[i][0]
	deadline := time.Now().Add(timeout)
	var promoted time.Time
	for promoted.IsZero() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		v, err := Do(ctx, r.Addr(), "ROLE")
		cancel()
		if parts, ok := v.([]any); err == nil && ok && len(parts) > 0 && parts[0] == "master" {
			promoted = time.Now()
			break
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("replica %s of master %d not promoted after %s (ROLE: %v, %v)", r.Addr(), i, timeout, v, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// The promoted replica now owns a slot of the old master.
	var slot int
	for s, o := range c.owner {
		if o == i {
			slot = s
			break
		}
	}
	for {
		ok := true
		for _, s := range c.all() {
			if !s.Running() {
				continue
			}
			if st := clusterState(s.Addr(), 0); st != "" {
				ok = false
				break
			}
		}
		if ok {
			if owner, err := c.slotOwnerPort(slot); err == nil && owner == r.Port() {
				return promoted, nil
			}
		}
		if time.Now().After(deadline) {
			return promoted, fmt.Errorf("replica %s promoted but the cluster does not serve master %d's slots from it after %s", r.Addr(), i, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// slotOwnerPort asks the first running master which port serves slot.
func (c *ClusterServers) slotOwnerPort(slot int) (int, error) {
	for _, s := range c.Nodes {
		if !s.Running() {
			continue
		}
		r, err := s.Do("CLUSTER", "SLOTS")
		if err != nil {
			return 0, err
		}
		rows, _ := r.([]any)
		for _, row := range rows {
			f, _ := row.([]any)
			if len(f) < 3 {
				continue
			}
			lo, _ := f[0].(int64)
			hi, _ := f[1].(int64)
			if int64(slot) < lo || int64(slot) > hi {
				continue
			}
			node, _ := f[2].([]any)
			if len(node) < 2 {
				continue
			}
			port, _ := node[1].(int64)
			return int(port), nil
		}
		return 0, fmt.Errorf("slot %d unassigned", slot)
	}
	return 0, fmt.Errorf("no running master")
}

// clusterState returns "" when addr reports cluster_state:ok, all 16384
// slots assigned and (when n > 0) n known nodes; otherwise what is missing.
func clusterState(addr string, n int) string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	r, err := Do(ctx, addr, "CLUSTER", "INFO")
	if err != nil {
		return err.Error()
	}
	info, _ := r.(string)
	want := []string{"cluster_state:ok", "cluster_slots_assigned:16384"}
	if n > 0 {
		want = append(want, "cluster_slots_ok:16384", "cluster_known_nodes:"+strconv.Itoa(n))
	}
	for _, w := range want {
		if !strings.Contains(info, w+"\r\n") && !strings.HasSuffix(info, w) {
			return "no " + w
		}
	}
	return ""
}

// KeySlot asks the cluster which hash slot key maps to (CLUSTER KEYSLOT).
func (c *ClusterServers) KeySlot(key string) (int64, error) {
	var last error
	for _, s := range c.all() {
		if !s.Running() {
			continue
		}
		r, err := s.Do("CLUSTER", "KEYSLOT", key)
		if err != nil {
			last = err
			continue
		}
		n, ok := r.(int64)
		if !ok {
			return 0, fmt.Errorf("CLUSTER KEYSLOT %q: unexpected reply %T", key, r)
		}
		return n, nil
	}
	return 0, fmt.Errorf("CLUSTER KEYSLOT %q: no node answers: %v", key, last)
}

// MoveEmptySlot gives slot, which must hold no key, to master to (an index
// in Nodes) on every running master (CLUSTER SETSLOT … NODE): the former
// owner then answers MOVED for it, as during a resharding, to a client
// whose slot map is older.
func (c *ClusterServers) MoveEmptySlot(slot, to int) error {
	id := c.ids[c.Nodes[to]]
	// The new owner first, so that it never redirects back.
	order := append([]*Server{c.Nodes[to]}, c.Nodes...)
	for _, s := range order {
		if !s.Running() {
			continue
		}
		if _, err := s.Do("CLUSTER", "SETSLOT", strconv.Itoa(slot), "NODE", id); err != nil {
			return fmt.Errorf("CLUSTER SETSLOT %d NODE %s on %s: %w", slot, id, s.Addr(), err)
		}
	}
	return nil
}

// MigrateConfig paces a slot migration (ClusterServers.MigrateSlot).
type MigrateConfig struct {
	// Chunk is how many keys one MIGRATE moves. Default 10.
	Chunk int
	// Pause is how long the migration waits after each chunk, which
	// stretches the window in which the slot's keys are split between
	// the two masters (the source answers ASK for the moved ones, and
	// TRYAGAIN for a multi-key command whose keys are on both sides), as
	// an operator's rate-limited resharding does. Default 0.
	Pause time.Duration
}

// MigrateSlot moves slot, with its keys, from the master that serves it
// now to master to (an index in Nodes), by hand as `redis-cli --cluster
// reshard` does: CLUSTER SETSLOT IMPORTING on the target and MIGRATING on
// the source, then MIGRATE of the slot's keys in chunks (CLUSTER
// GETKEYSINSLOT) until the source holds none, then CLUSTER SETSLOT NODE
// on every running master, the target first. Keys written to the slot
// while it migrates are moved too: the source keeps serving the keys it
// still holds. It returns once every master gives the slot to the target.
func (c *ClusterServers) MigrateSlot(slot, to int, cfg MigrateConfig) error {
	if cfg.Chunk <= 0 {
		cfg.Chunk = 10
	}
	port, err := c.slotOwnerPort(slot)
	if err != nil {
		return err
	}
	from := -1
	for i, s := range c.Nodes {
		if s.Port() == port {
			from = i
		}
	}
	if from < 0 || from == to {
		return fmt.Errorf("migrate slot %d: served by port %d, not by another master than %d", slot, port, to)
	}
	src, dst := c.Nodes[from], c.Nodes[to]
	sl := strconv.Itoa(slot)
	if _, err := dst.Do("CLUSTER", "SETSLOT", sl, "IMPORTING", c.ids[src]); err != nil {
		return fmt.Errorf("CLUSTER SETSLOT %d IMPORTING on %s: %w", slot, dst.Addr(), err)
	}
	if _, err := src.Do("CLUSTER", "SETSLOT", sl, "MIGRATING", c.ids[dst]); err != nil {
		return fmt.Errorf("CLUSTER SETSLOT %d MIGRATING on %s: %w", slot, src.Addr(), err)
	}
	for {
		r, err := src.Do("CLUSTER", "GETKEYSINSLOT", sl, strconv.Itoa(cfg.Chunk))
		if err != nil {
			return fmt.Errorf("CLUSTER GETKEYSINSLOT %d on %s: %w", slot, src.Addr(), err)
		}
		keys, _ := r.([]any)
		if len(keys) == 0 {
			break
		}
		args := []string{"MIGRATE", "127.0.0.1", strconv.Itoa(dst.Port()), "", "0", "5000", "KEYS"}
		for _, k := range keys {
			ks, _ := k.(string)
			args = append(args, ks)
		}
		if _, err := src.Do(args...); err != nil {
			return fmt.Errorf("MIGRATE %d keys of slot %d from %s to %s: %w", len(keys), slot, src.Addr(), dst.Addr(), err)
		}
		if cfg.Pause > 0 {
			time.Sleep(cfg.Pause)
		}
	}
	order := append([]*Server{dst}, c.Nodes...)
	for _, s := range order {
		if !s.Running() {
			continue
		}
		if _, err := s.Do("CLUSTER", "SETSLOT", sl, "NODE", c.ids[dst]); err != nil {
			return fmt.Errorf("CLUSTER SETSLOT %d NODE %s on %s: %w", slot, c.ids[dst], s.Addr(), err)
		}
	}
	return nil
}
