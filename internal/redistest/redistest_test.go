package redistest

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestSingleAnswersAndSurvivesARestartOnTheSamePort(t *testing.T) {
	s := Single(t)
	if s.Port() == 6379 {
		t.Fatalf("private server must not use 6379")
	}
	if _, err := s.Do("SET", "k", "v"); err != nil {
		t.Fatalf("SET: %v", err)
	}
	s.Stop()
	if _, err := s.Do("PING"); err == nil {
		t.Fatalf("PING to a stopped server succeeded")
	}
	s.Start()
	r, err := s.Do("PING")
	if err != nil || r != "PONG" {
		t.Fatalf("PING after restart = %v, %v", r, err)
	}
	if r, _ := s.Do("GET", "k"); r != nil {
		t.Fatalf("restarted server kept data: GET k = %v", r)
	}
}

func TestFrozenServerTimesOutAndThawedServerAnswers(t *testing.T) {
	s := Single(t)
	s.Freeze()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	_, err := Do(ctx, s.Addr(), "PING")
	cancel()
	if err == nil {
		t.Fatalf("PING to a frozen server succeeded")
	}
	s.Thaw()
	if r, err := s.Do("PING"); err != nil || r != "PONG" {
		t.Fatalf("PING after thaw = %v, %v", r, err)
	}
}

func TestClusterOfThreeMastersServesAllSlots(t *testing.T) {
	c := Cluster(t, 3)
	if len(c.Addrs) != 3 {
		t.Fatalf("got %d addresses", len(c.Addrs))
	}
	r, err := c.Nodes[0].Do("CLUSTER", "INFO")
	if err != nil || !strings.Contains(r.(string), "cluster_state:ok") {
		t.Fatalf("CLUSTER INFO = %v, %v", r, err)
	}
	a, err := c.KeySlot("rl:{x}:a")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := c.KeySlot("other:{x}:b")
	if a != b {
		t.Fatalf("same hash tag, different slots %d and %d", a, b)
	}
}

func TestSentinelReportsThePrimary(t *testing.T) {
	sn := Sentinel(t)
	got, err := sn.MasterAddr()
	if err != nil || got != sn.Primary.Addr() {
		t.Fatalf("master address = %q, %v; want %s", got, err, sn.Primary.Addr())
	}
}

func TestClusterWithReplicasPromotesTheReplicaOfAKilledMaster(t *testing.T) {
	c := ClusterWith(t, ClusterConfig{Replicas: 1, NodeTimeout: 1000 * time.Millisecond})
	if len(c.Replicas) != 3 || len(c.Replicas[1]) != 1 {
		t.Fatalf("replicas = %v, want one per master", c.Replicas)
	}
	if o := c.OwnerAtStart(0); o < 0 || o > 2 {
		t.Fatalf("owner of slot 0 = %d", o)
	}
	killed := c.KillMaster(1)
	promoted, err := c.WaitPromoted(1, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("replica promoted %s after the kill", promoted.Sub(killed))
	if promoted.Sub(killed) < 500*time.Millisecond {
		t.Fatalf("promoted %s after the kill: faster than the node timeout allows", promoted.Sub(killed))
	}
}

func TestSentinelFailsOverToTheReplicaOfAKilledPrimary(t *testing.T) {
	sn := SentinelWith(t, SentinelConfig{Replicas: 1, DownAfter: time.Second})
	killed := sn.KillPrimary()
	at, err := sn.WaitMaster(sn.Replicas[0].Addr(), 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("sentinel switched %s after the kill", at.Sub(killed))
	if r, err := sn.Replicas[0].Do("SET", "k", "v"); err != nil || r != "OK" {
		t.Fatalf("SET on the promoted replica = %v, %v", r, err)
	}
}

func TestInfoReturnsTheFieldsOfASection(t *testing.T) {
	srv := Single(t)
	info, err := srv.Info("server")
	if err != nil {
		t.Fatal(err)
	}
	if v := info["redis_version"]; v == "" || strings.ContainsAny(v, "\r\n") {
		t.Errorf("redis_version %q in %v: want the server's version", v, info)
	}
	if _, ok := info["used_cpu_user"]; ok {
		t.Errorf("INFO server holds used_cpu_user: the section was not the one asked for")
	}
}
