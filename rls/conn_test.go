package rls_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	grpccodes "google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/rls"
)

// startWith serves the suite's rules on a gRPC server with the options of sc.
func startWith(t *testing.T, sc rls.ServerConfig) *harness {
	t.Helper()
	dir := writeDir(t, map[string]string{"suite.yaml": suiteConfig})
	rules, err := rls.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := rls.New(rls.Config{Engine: limiter.Config{Store: limiter.NewMemoryStore(limiter.MemoryConfig{})}}, rules)
	if err != nil {
		t.Fatal(err)
	}
	return serve(t, svc, nil, sc.Options()...)
}

// A client that sends half the HTTP/2 preface and nothing more holds its connection (and a
// descriptor) 10 s, as the HTTP listeners hold a half-sent request head, not grpc-go's 120 s.
func TestAHalfSentPrefaceIsCutAfterTheConnectionTimeout(t *testing.T) {
	h := startWith(t, rls.ServerConfig{})
	conn, err := net.Dial("tcp", h.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(http2.ClientPreface[:len(http2.ClientPreface)/2])); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_ = conn.SetReadDeadline(start.Add(rls.DefaultConnectionTimeout + 5*time.Second))
	_, err = conn.Read(make([]byte, 64<<10)) // the server's settings, if it sends them, then EOF
	for err == nil {
		_, err = conn.Read(make([]byte, 64<<10))
	}
	took := time.Since(start)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("the half-opened connection still open after %s, want closed at %s", took.Round(time.Second), rls.DefaultConnectionTimeout)
	}
	if took < rls.DefaultConnectionTimeout-time.Second {
		t.Fatalf("closed after %s (%v), before the connection timeout of %s", took, err, rls.DefaultConnectionTimeout)
	}
	t.Logf("a half-sent preface cut after %s (%v)", took.Round(10*time.Millisecond), err)
}

func TestStreamsBeyondMaxConcurrentStreamsWait(t *testing.T) {
	const maxStreams, opened = 100, 1500
	h := startWith(t, rls.ServerConfig{MaxConcurrentStreams: maxStreams})
	health := healthpb.NewHealthClient(h.conn)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan struct{}, opened)
	for range opened {
		go func() {
			w, err := health.Watch(ctx, &healthpb.HealthCheckRequest{})
			if err != nil {
				return
			}
			if _, err := w.Recv(); err == nil {
				served <- struct{}{}
			}
		}()
	}
	deadline := time.After(10 * time.Second)
	for range maxStreams {
		select {
		case <-served:
		case <-deadline:
			t.Fatal("fewer than max_concurrent_streams watches were served within 10s")
		}
	}
	// With every stream of the connection taken, one more waits.
	pctx, pcancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer pcancel()
	_, err := health.Check(pctx, &healthpb.HealthCheckRequest{})
	if status.Code(err) != grpccodes.DeadlineExceeded {
		t.Errorf("a call beyond %d streams: %v, want it to wait (DeadlineExceeded)", maxStreams, err)
	}
	if n := len(served); n != 0 {
		t.Errorf("%d watches served beyond the %d allowed", n, maxStreams)
	}
	cancel()
	// Freed streams serve again.
	cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer ccancel()
	if _, err := health.Check(cctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true)); err != nil {
		t.Errorf("a call after the watches ended: %v", err)
	}
}

func TestAConnectionIdleAfterThePrefaceIsClosed(t *testing.T) {
	const idle = 300 * time.Millisecond
	h := startWith(t, rls.ServerConfig{MaxConnectionIdle: idle})
	conn, err := grpc.NewClient(h.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn.Connect()
	for st := conn.GetState(); st != connectivity.Ready; st = conn.GetState() {
		if !conn.WaitForStateChange(ctx, st) {
			t.Fatalf("never connected: %s", st)
		}
	}
	ready := time.Now()
	if !conn.WaitForStateChange(ctx, connectivity.Ready) {
		t.Fatalf("a connection idle for 10s is still open, want it closed after max_connection_idle %s", idle)
	}
	if d := time.Since(ready); d < idle/2 {
		t.Errorf("closed after %s, before max_connection_idle %s", d, idle)
	}
}

// rawConn is an HTTP/2 connection to addr past the preface and settings,
// for what gRPC's client does not let a test send.
func rawConn(t *testing.T, addr string) (*http2.Framer, net.Conn) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return fr, c
}

// untilPingAckOrGoAway reads frames until a PING ack (nil) or a GOAWAY.
func untilPingAckOrGoAway(t *testing.T, fr *http2.Framer) *http2.GoAwayFrame {
	t.Helper()
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		switch f := f.(type) {
		case *http2.PingFrame:
			if f.IsAck() {
				return nil
			}
		case *http2.GoAwayFrame:
			return f
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = fr.WriteSettingsAck()
			}
		}
	}
}

func TestPingsFasterThanTheKeepalivePolicyGetGoAway(t *testing.T) {
	h := startWith(t, rls.ServerConfig{KeepaliveMinTime: time.Minute, KeepalivePermitWithoutStream: true})
	fr, _ := rawConn(t, h.addr)
	for i := range 10 {
		if err := fr.WritePing(false, [8]byte{byte(i)}); err != nil {
			break // the server may have closed already
		}
	}
	for range 10 {
		if ga := untilPingAckOrGoAway(t, fr); ga != nil {
			if ga.ErrCode != http2.ErrCodeEnhanceYourCalm || !strings.Contains(string(ga.DebugData()), "too_many_pings") {
				t.Errorf("GOAWAY %s %q, want ENHANCE_YOUR_CALM too_many_pings", ga.ErrCode, ga.DebugData())
			}
			return
		}
	}
	t.Error("10 pings at once were all answered, want GOAWAY")
}
