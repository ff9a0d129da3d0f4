package redisstore

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// newTestFence is a fence following no Sentinel, fed events by hand; its
// probes ask addresses that refuse.
func newTestFence(t *testing.T) *fence {
	t.Helper()
	f := newFence("m", nil, redis.Options{}, redis.Options{DialTimeout: 10 * time.Millisecond}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(f.close)
	return f
}

// The events of a Sentinel failover, in Sentinel's words: once the
// replica is chosen writes still go to the old primary (counted); once
// REPLICAOF NO ONE is sent nothing is written to the old primary nor,
// until it takes writes, to the promoted one; the promotion routes writes
// to the promoted one alone; another master's events change nothing.
func TestFenceFollowsAPromotionFromItsFirstStep(t *testing.T) {
	f := newTestFence(t)
	const old, promoted = "127.0.0.1:1", "127.0.0.1:2"
	if got := f.adopt(old); got != old || !f.writable(old) {
		t.Fatalf("before any event: adopt gives %q, writable %v; want the named primary, writable", got, f.writable(old))
	}
	f.heard("+failover-state-send-slaveof-noone", "slave 127.0.0.1:3 127.0.0.1 3 @ other 127.0.0.1 1")
	f.heard("+failover-state-wait-promotion", "slave 127.0.0.1:3 127.0.0.1 3 @ other 127.0.0.1 1")
	if !f.writable(old) || f.gen.Load().stale.Load() {
		t.Fatal("another master's promotion fenced this one's primary")
	}
	f.heard("+failover-state-send-slaveof-noone", "slave 127.0.0.1:2 127.0.0.1 2 @ m 127.0.0.1 1")
	if !f.writable(old) || !f.gen.Load().stale.Load() {
		t.Fatalf("once the replica is chosen: old writable %v, counted %v; want both", f.writable(old), f.gen.Load().stale.Load())
	}
	f.heard("+failover-state-wait-promotion", "slave 127.0.0.1:2 127.0.0.1 2 @ m 127.0.0.1 1")
	if f.writable(old) || f.writable(promoted) {
		t.Fatalf("while the replica is promoted: old writable %v, promoted writable %v; want neither", f.writable(old), f.writable(promoted))
	}
	f.heard("+promoted-slave", "slave 127.0.0.1:2 127.0.0.1 2 @ m 127.0.0.1 1")
	if f.writable(old) || !f.writable(promoted) {
		t.Fatalf("once promoted: old writable %v, promoted writable %v; want the promoted one alone", f.writable(old), f.writable(promoted))
	}
	// A Sentinel that has not switched yet names the old primary.
	if got := f.adopt(old); got != promoted {
		t.Errorf("a new connection named the demoted primary goes to %q, want %q", got, promoted)
	}
	f.heard("+switch-master", "m 127.0.0.1 1 127.0.0.1 2")
	if !f.writable(promoted) || f.writable(old) {
		t.Error("+switch-master to the promoted primary changed the route")
	}
}

// A failover given up after its first step routes writes back to the
// old primary, and one given up once the replica was chosen closes its
// window: later decisions are not counted.
func TestFenceLiftsToTheOldPrimaryWhenTheFailoverIsGivenUp(t *testing.T) {
	f := newTestFence(t)
	f.adopt("127.0.0.1:1")
	f.heard("+failover-state-send-slaveof-noone", "slave 127.0.0.1:2 127.0.0.1 2 @ m 127.0.0.1 1")
	f.heard("-failover-abort-not-elected", "master m 127.0.0.1 1")
	if g := f.enter(); f.leave(g, 1) != 0 || !f.writable("127.0.0.1:1") {
		t.Fatal("after a failover given up once the replica was chosen, decisions on the old primary are still counted")
	}
	f.heard("+failover-state-wait-promotion", "slave 127.0.0.1:2 127.0.0.1 2 @ m 127.0.0.1 1")
	f.heard("-failover-abort-slave-timeout", "master m 127.0.0.1 1")
	if !f.writable("127.0.0.1:1") || f.writable("127.0.0.1:2") {
		t.Error("after the failover was given up, writes do not go to the old primary alone")
	}
}

// Calls on their way when the replica is chosen, and calls sent until
// the route turns, are counted unconfirmed in the window; calls sent to
// the promoted primary are not; the window closes when the last counted
// call ends.
func TestFenceCountsTheCallsOfTheWindow(t *testing.T) {
	f := newTestFence(t)
	f.adopt("127.0.0.1:1")
	before := f.enter()
	failed := f.enter()
	f.heard("+failover-state-send-slaveof-noone", "slave 127.0.0.1:2 127.0.0.1 2 @ m 127.0.0.1 1")
	armed := f.enter()
	if got := f.leave(armed, 2); got != 2 {
		t.Errorf("a call of 2 writes sent once the replica was chosen: %d unconfirmed, want 2", got)
	}
	f.heard("+failover-state-wait-promotion", "slave 127.0.0.1:2 127.0.0.1 2 @ m 127.0.0.1 1")
	f.heard("+promoted-slave", "slave 127.0.0.1:2 127.0.0.1 2 @ m 127.0.0.1 1")
	after := f.enter()
	if got := f.leave(after, 5); got != 0 {
		t.Errorf("a call sent to the promoted primary: %d unconfirmed, want 0", got)
	}
	if len(f.windows) != 0 {
		t.Fatalf("the window closed with calls still on their way")
	}
	if got := f.leave(before, 3); got != 3 {
		t.Errorf("a call of 3 writes on its way when the replica was chosen: %d unconfirmed, want 3", got)
	}
	if got := f.leave(failed, 0); got != 0 {
		t.Errorf("a failed call: %d unconfirmed, want 0", got)
	}
	if len(f.windows) != 1 || f.windows[0].unconfirmed != 5 {
		t.Fatalf("windows %+v, want one of 5 unconfirmed", f.windows)
	}
}

// A connection waiting out a fence waits until its deadline (a
// deadlineCtx has no Done), or until the promoted primary takes writes.
func TestFenceHoldsNewConnectionsUntilThePromotionOrTheDeadline(t *testing.T) {
	f := newTestFence(t)
	f.adopt("127.0.0.1:1")
	f.heard("+failover-state-wait-promotion", "slave 127.0.0.1:2 127.0.0.1 2 @ m 127.0.0.1 1")
	dctx := &deadlineCtx{Context: context.Background(), deadline: time.Now().Add(20 * time.Millisecond)}
	if err := f.wait(dctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait while fenced: %v, want a deadline exceeded", err)
	}
	done := make(chan error, 1)
	go func() { done <- f.wait(context.Background()) }()
	f.heard("+promoted-slave", "slave 127.0.0.1:2 127.0.0.1 2 @ m 127.0.0.1 1")
	if err := <-done; err != nil {
		t.Fatalf("wait across the promotion: %v", err)
	}
	c := &fencedConn{Conn: nopConn{}, f: f, addr: "127.0.0.1:1"}
	if _, err := c.Write([]byte("x")); !errors.Is(err, errFenced) {
		t.Errorf("a write to the demoted primary: %v, want errFenced", err)
	}
}

// nopConn is a net.Conn that writes nowhere.
type nopConn struct{ net.Conn }

func (nopConn) Write(b []byte) (int, error) { return len(b), nil }
