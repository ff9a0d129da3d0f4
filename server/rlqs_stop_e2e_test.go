package server_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/eventually"
	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/rlqs/filtersim"
)

// TestAStoppedReplicaEndsItsQuotaStreams: a replica told to stop (SIGTERM, as a rollout does)
// ends its quota streams at once rather than holding them open for the drain of
// server.shutdown_timeout (15 s): each Envoy's filter restarts its stream on the next replica at
// its next report, and is assigned there while its assignment from the stopped one still holds.
func TestAStoppedReplicaEndsItsQuotaStreams(t *testing.T) {
	rds := redistest.Single(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "chat.yaml"), []byte(rlqsChatDomain), 0o600); err != nil {
		t.Fatal(err)
	}
	a, b := startRLQSReplica(t, rds.URL(), dir), startRLQSReplica(t, rds.URL(), dir)
	c := filtersim.Start(filtersim.Config{Addrs: []string{a.addrs["grpc"], b.addrs["grpc"]}, Domain: "chat", ReportInterval: time.Second})
	t.Cleanup(c.Close)
	c.Request(rlqsChat)
	eventually.True(t, 5*time.Second, "an assignment from a", func() bool { return assignedRate(c) > 0 })
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	select {
	case <-a.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("a did not exit within 10s of SIGTERM with a quota stream open")
	}
	t.Logf("a exited %s after SIGTERM", time.Since(stopped).Round(time.Millisecond))
	if a.err != nil {
		t.Errorf("a's exit: %v\n%s", a.err, a.log())
	}
	eventually.True(t, 3*time.Second, "an assignment from b", func() bool { return c.AssignedAt(rlqsChat).After(stopped) && c.Streams() == 2 })
	t.Logf("assigned by b %s after a's SIGTERM", time.Since(stopped).Round(time.Millisecond))
}
