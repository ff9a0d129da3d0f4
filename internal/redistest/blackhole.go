package redistest

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Link is a TCP relay in front of a server that a test can black-hole, as a
// network that drops every packet between a client and Redis: no command
// reaches the server, no reply comes back, nothing is refused or reset, and
// a new connection hangs in its dial as when the SYN is dropped. No root is
// needed (see BlackHole). Make one with Relay. BlackHole, Restore and Close
// are for the test's goroutine (they fail the test on an error); Addr, URL
// and Relayed are safe for concurrent use.
type Link struct {
	t        testing.TB
	upstream string
	ln       *net.TCPListener
	backlog  int // the listener's accept backlog outside a black hole

	done chan struct{} // closed by Close
	wg   sync.WaitGroup

	mu sync.Mutex
	// flowing is closed while bytes flow; BlackHole replaces it by an open
	// channel, which Restore closes.
	flowing chan struct{}
	holed   bool
	closed  bool
	// parked is signalled by the accept loop when it has stopped accepting
	// for a black hole.
	parked  chan struct{}
	fillers map[string]net.Conn // by local address: the link's own connections filling its accept queue
	conns   map[net.Conn]struct{}
	relayed int
	// latency is the one-way delay of every chunk, in nanoseconds (see
	// SetLatency).
	latency atomic.Int64
}

// Relay starts a Link on a free port of 127.0.0.1 that forwards every
// connection to upstream ("host:port") and passes bytes both ways. It is
// closed by t.Cleanup (register it after the server it relays to, so that
// it closes first).
func Relay(t testing.TB, upstream string) *Link {
	t.Helper()
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatalf("redistest: relay to %s: listen: %v", upstream, err)
	}
	_, backlog, err := acceptQueue(ln)
	if err != nil {
		_ = ln.Close()
		t.Fatalf("redistest: relay to %s: %v", upstream, err)
	}
	flowing := make(chan struct{})
	close(flowing)
	l := &Link{
		t: t, upstream: upstream, ln: ln, backlog: backlog,
		done: make(chan struct{}), flowing: flowing, parked: make(chan struct{}, 1),
		fillers: map[string]net.Conn{}, conns: map[net.Conn]struct{}{},
	}
	l.wg.Add(1)
	go l.acceptLoop()
	t.Cleanup(l.Close)
	return l
}

// Addr is the link's "127.0.0.1:port", the same for its whole life, black
// holes included.
func (l *Link) Addr() string { return l.ln.Addr().String() }

// URL is the link's address as a redis:// URL for database 0.
func (l *Link) URL() string { return "redis://" + l.Addr() + "/0" }

// Relayed is how many client connections the link has accepted and relayed
// so far (its own connections filling the accept queue not counted).
func (l *Link) Relayed() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.relayed
}

// BlackHole makes the link drop everything, as a network that lost its
// route to Redis. On connections already open, bytes are held in either
// direction (the link stops reading, the kernel's buffers fill), neither
// forwarded nor refused nor reset, until Restore, when they go on as TCP
// retransmissions would once a partition heals. A new connection hangs in
// its dial: the link stops accepting, shrinks its listener's accept backlog
// to nothing and fills it with connections of its own, and Linux drops a
// SYN that finds the accept queue of its listener full (whatever
// net.ipv4.tcp_abort_on_overflow says, which concerns the handshake's last
// ACK), so the client sends it again after 1 s, 3 s ... until its dial
// timeout. The port stays the same. Black-holing a black-holed link does
// nothing. It needs Linux; elsewhere it fails the test.
func (l *Link) BlackHole() {
	l.t.Helper()
	if err := l.blackHole(); err != nil {
		l.t.Fatalf("redistest: black-hole the link %s: %v", l.Addr(), err)
	}
}

func (l *Link) blackHole() error {
	l.mu.Lock()
	if l.holed || l.closed {
		l.mu.Unlock()
		return nil
	}
	l.holed = true
	l.flowing = make(chan struct{})
	// A deadline in the past ends the Accept in progress; connections that
	// arrive from now on wait in the accept queue.
	_ = l.ln.SetDeadline(time.Unix(1, 0))
	l.mu.Unlock()
	select {
	case <-l.parked:
	case <-time.After(5 * time.Second):
		return errors.New("the accept loop did not stop")
	}
	if err := setBacklog(l.ln, 0); err != nil {
		return err
	}
	// Fill the accept queue until the kernel counts it full: then it drops
	// every further SYN.
	for range 64 {
		queued, most, err := acceptQueue(l.ln)
		if err != nil {
			return err
		}
		if queued > most {
			return nil
		}
		c, err := net.DialTimeout("tcp", l.Addr(), time.Second)
		if err != nil {
			return fmt.Errorf("fill the accept queue (%d queued, at most %d): %w", queued, most, err)
		}
		l.mu.Lock()
		l.fillers[c.LocalAddr().String()] = c
		l.mu.Unlock()
		// The listener queues the connection when the handshake's last ACK
		// arrives, which on loopback is at once, but do not count on it.
		for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
			if q, _, err := acceptQueue(l.ln); err != nil || q > queued {
				break
			}
		}
	}
	return errors.New("the accept queue is never full: new connections would not hang")
}

// Restore ends a black hole: held bytes are delivered, the listener gets
// its backlog back and accepts again, and dials whose SYN is sent again
// from now on connect. Restoring a link that is not black-holed does
// nothing.
func (l *Link) Restore() {
	l.t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.holed || l.closed {
		return
	}
	if err := setBacklog(l.ln, l.backlog); err != nil {
		l.t.Fatalf("redistest: restore the link %s: %v", l.Addr(), err)
	}
	// The accept loop closes the accepted ends of the fillers.
	for _, c := range l.fillers {
		_ = c.Close()
	}
	l.holed = false
	close(l.flowing)
}

// Close stops the link: its listener and every connection it relays are
// closed, and its goroutines have ended when it returns. Closing twice does
// nothing.
func (l *Link) Close() {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.closed = true
	close(l.done)
	_ = l.ln.Close()
	for c := range l.conns {
		_ = c.Close()
	}
	for _, c := range l.fillers {
		_ = c.Close()
	}
	l.mu.Unlock()
	l.wg.Wait()
}

// acceptLoop accepts connections and relays them; during a black hole it
// waits, leaving new connections in the accept queue.
func (l *Link) acceptLoop() {
	defer l.wg.Done()
	for {
		c, err := l.ln.Accept()
		if err != nil {
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				return // closed
			}
			l.mu.Lock()
			flowing := l.flowing
			l.mu.Unlock()
			select {
			case l.parked <- struct{}{}:
			default:
			}
			select {
			case <-flowing:
			case <-l.done:
				return
			}
			l.mu.Lock()
			if !l.holed {
				_ = l.ln.SetDeadline(time.Time{})
			}
			l.mu.Unlock()
			continue
		}
		l.mu.Lock()
		filler, isFiller := l.fillers[c.RemoteAddr().String()]
		if isFiller {
			delete(l.fillers, c.RemoteAddr().String())
			_ = filler.Close()
		}
		if isFiller || l.closed {
			l.mu.Unlock()
			_ = c.Close()
			continue
		}
		l.conns[c] = struct{}{}
		l.relayed++
		l.wg.Add(1)
		l.mu.Unlock()
		go l.relay(c)
	}
}

// relay connects client to the upstream server and pumps bytes both ways
// until either side closes or the link does.
func (l *Link) relay(client net.Conn) {
	defer l.wg.Done()
	// The upstream is a local server: it answers or refuses at once, or
	// accepts in its kernel when frozen.
	server, err := net.DialTimeout("tcp", l.upstream, 5*time.Second)
	l.mu.Lock()
	if err != nil || l.closed {
		delete(l.conns, client)
		l.mu.Unlock()
		_ = client.Close()
		if server != nil {
			_ = server.Close()
		}
		return
	}
	l.conns[server] = struct{}{}
	l.mu.Unlock()
	var pumps sync.WaitGroup
	pumps.Add(2)
	go func() { defer pumps.Done(); l.pump(server, client) }()
	go func() { defer pumps.Done(); l.pump(client, server) }()
	pumps.Wait()
	l.mu.Lock()
	delete(l.conns, client)
	delete(l.conns, server)
	l.mu.Unlock()
}

// pump copies src to dst, each chunk only while the link is not
// black-holed, and closes both when src ends (an end is held in a black
// hole too: a FIN or RST does not cross it either).
func (l *Link) pump(dst, src net.Conn) {
	defer func() {
		_ = src.Close()
		_ = dst.Close()
	}()
	buf := make([]byte, 32<<10)
	var line *delayLine // set once the link has a latency (see SetLatency)
	defer func() {
		if line != nil {
			line.finish()
		}
	}()
	for {
		n, err := src.Read(buf)
		if !l.wait() {
			return
		}
		if n > 0 {
			if line == nil && l.latency.Load() > 0 {
				line = l.newDelayLine(dst)
			}
			if line != nil {
				if !line.send(buf[:n]) {
					return
				}
			} else if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // the end, a reset or a closed link: both ends close
		}
	}
}

// wait returns true when bytes may flow (at once unless black-holed), false
// when the link is closed first.
func (l *Link) wait() bool {
	l.mu.Lock()
	flowing := l.flowing
	l.mu.Unlock()
	select {
	case <-flowing:
		return true
	case <-l.done:
		return false
	}
}
