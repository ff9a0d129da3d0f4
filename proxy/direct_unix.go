//go:build unix

package proxy

import (
	"errors"
	"net"
	"os"
	"syscall"
)

// directPath: the direct path needs a non-blocking peek at an idle connection.
const directPath = true

// idleProbe looks at an idle upstream connection without blocking or allocating.
// One goroutine at a time uses it (whoever holds the connection).
type idleProbe struct {
	rc   syscall.RawConn // nil: the connection has no file descriptor
	look func(fd uintptr)
	open bool
	buf  [1]byte

	// sendThenAwait's state, for send, made once so that a call allocates nothing.
	send    func(fd uintptr) bool
	pending []byte
	sent    int
	sendErr error
	waiting bool
}

func newIdleProbe(c net.Conn) *idleProbe {
	p := &idleProbe{}
	if sc, ok := c.(syscall.Conn); ok {
		p.rc, _ = sc.SyscallConn()
	}
	p.look = func(fd uintptr) {
		n, _, err := syscall.Recvfrom(int(fd), p.buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		// Nothing to read: open and quiet. n == 0: the upstream closed
		// it; n > 0: it sent something nobody asked for.
		p.open = n < 0 && (errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EWOULDBLOCK))
	}
	p.send = func(fd uintptr) bool {
		if p.waiting {
			return true // readable, or the read deadline passed
		}
		for p.sent < len(p.pending) {
			n, err := syscall.Write(int(fd), p.pending[p.sent:])
			if err == syscall.EINTR {
				continue
			}
			if err != nil {
				if !errors.Is(err, syscall.EAGAIN) {
					p.sendErr = os.NewSyscallError("write", err)
				}
				return true
			}
			p.sent += n
		}
		p.waiting = true
		return false
	}
	return p
}

// sendThenAwait writes b to the connection without blocking and, when all of it
// went, waits until the connection is readable or its read deadline passes, so
// that the read of the answer finds bytes rather than first finding none (a system
// call saved). The write is done inside the wait, after the poller forgot the
// connection's earlier readiness, so an answer coming at once is not missed.
// sent < len(b) with a nil error leaves the rest to the caller.
func (p *idleProbe) sendThenAwait(b []byte) (sent int, err error) {
	if p.rc == nil {
		return 0, nil
	}
	p.pending, p.sent, p.sendErr, p.waiting = b, 0, nil, false
	_ = p.rc.Read(p.send) // a failed wait leaves its error to the read that follows
	sent, err = p.sent, p.sendErr
	p.pending, p.sendErr = nil, nil
	return sent, err
}

// stillOpen says, at the cost of one non-blocking system call, whether an idle
// connection can carry another request: the upstream (whose keep-alive timeout may
// be shorter than ours) has not closed it, nor sent anything unasked. Through
// Control, not Read: a read deadline the last exchange left, past or not, is
// not this look's.
func (p *idleProbe) stillOpen() bool {
	if p.rc == nil {
		return true
	}
	p.open = false
	return p.rc.Control(p.look) == nil && p.open
}
