package redistest

import (
	"bufio"
	"context"
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/leakcheck"
)

// TestMain fails the package's tests if any goroutine they started (a
// link's relays, a server's waiter) is still running after them.
func TestMain(m *testing.M) { leakcheck.Main(m, nil) }

// ping sends PING on c and reads the reply within wait.
func ping(c net.Conn, wait time.Duration) (any, error) {
	if _, err := c.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		return nil, err
	}
	return readWithin(c, bufio.NewReader(c), wait)
}

func readWithin(c net.Conn, r *bufio.Reader, wait time.Duration) (any, error) {
	_ = c.SetReadDeadline(time.Now().Add(wait))
	return readReply(r)
}

// dialHangs dials addr with a 300 ms timeout and fails the test unless the
// dial times out (neither refused nor accepted).
func dialHangs(t *testing.T, addr string) {
	t.Helper()
	start := time.Now()
	c, err := net.DialTimeout("tcp", addr, 300*time.Millisecond)
	took := time.Since(start)
	if err == nil {
		_ = c.Close()
		t.Fatalf("a dial to the black-holed link connected in %s", took)
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("a dial to the black-holed link failed in %s with %v, want a timeout", took, err)
	}
	if took < 290*time.Millisecond {
		t.Fatalf("a dial to the black-holed link timed out after %s, before its 300ms", took)
	}
}

func TestABlackHoledLinkHangsDialsAndHoldsCommandsUntilRestored(t *testing.T) {
	srv := Single(t)
	link := Relay(t, srv.Addr())
	addr := link.Addr()
	if r, err := Do(context.Background(), addr, "PING"); err != nil || r != "PONG" {
		t.Fatalf("PING through the link = %v, %v", r, err)
	}
	open, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	openReader := bufio.NewReader(open)
	if _, err := open.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		t.Fatal(err)
	}
	if r, err := readWithin(open, openReader, 2*time.Second); err != nil || r != "PONG" {
		t.Fatalf("PING on an open connection = %v, %v", r, err)
	}

	for round := 1; round <= 2; round++ {
		link.BlackHole()
		if link.Addr() != addr {
			t.Fatalf("round %d: the black-holed link moved from %s to %s", round, addr, link.Addr())
		}
		for range 3 {
			dialHangs(t, addr)
		}
		// A dial under way when the link is restored connects when its SYN
		// is sent again (Linux: 1 s after the first).
		late := make(chan error, 1)
		go func() {
			c, err := net.DialTimeout("tcp", addr, 3*time.Second)
			if err == nil {
				_, err = ping(c, 2*time.Second)
				_ = c.Close()
			}
			late <- err
		}()
		if _, err := open.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
			t.Fatalf("round %d: write on an open connection: %v", round, err)
		}
		r, err := readWithin(open, openReader, 300*time.Millisecond)
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("round %d: PING on an open connection through the black hole = %v, %v; want no reply (a read timeout)", round, r, err)
		}

		link.Restore()
		start := time.Now()
		if r, err := readWithin(open, openReader, 2*time.Second); err != nil || r != "PONG" {
			t.Fatalf("round %d: the PING held by the black hole, after Restore = %v, %v; want PONG", round, r, err)
		}
		t.Logf("round %d: the held PING answered %s after Restore", round, time.Since(start))
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		r, err = Do(ctx, addr, "PING")
		cancel()
		if err != nil || r != "PONG" {
			t.Fatalf("round %d: PING on a new connection after Restore = %v, %v", round, r, err)
		}
		if err := <-late; err != nil {
			t.Fatalf("round %d: a dial begun in the black hole, after Restore: %v", round, err)
		}
	}
	// The link's own connections that filled the accept queue are not relayed.
	if got := link.Relayed(); got != 6 {
		t.Errorf("link relayed %d connections, want 6: 2 before the black holes, 2 after each (the hung dials and the link's own connections never are)", got)
	}
}

func TestALinkForwardsManyConnectionsAtOnceOutsideABlackHole(t *testing.T) {
	srv := Single(t)
	link := Relay(t, srv.Addr())
	link.BlackHole()
	link.Restore()
	// After a black hole the listener has its backlog back: 64 dials at
	// once all connect at once (with a backlog of 0 most SYNs would wait
	// for their second sending, a second later).
	errs := make(chan error, 64)
	start := time.Now()
	for range 64 {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 900*time.Millisecond)
			defer cancel()
			r, err := Do(ctx, link.Addr(), "PING")
			if err == nil && r != "PONG" {
				err = errors.New("not PONG")
			}
			errs <- err
		}()
	}
	for range 64 {
		if err := <-errs; err != nil {
			t.Fatalf("one of 64 concurrent PINGs through a restored link: %v", err)
		}
	}
	t.Logf("64 concurrent PINGs through a restored link in %s", time.Since(start))
}
