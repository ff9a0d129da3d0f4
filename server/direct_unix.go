//go:build unix

package server

import (
	"errors"
	"net"
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
	return p
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
