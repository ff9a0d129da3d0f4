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
