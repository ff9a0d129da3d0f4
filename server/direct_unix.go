//go:build unix

package server

import (
	"errors"
	"net"
	"syscall"
)

// directPath says whether this platform has the direct path (it needs a
// non-blocking peek at an idle connection).
const directPath = true

// idleProbe looks at an idle upstream connection without blocking. Made
// once per connection, it allocates nothing per look. It is used by one
// goroutine at a time (whoever holds the connection).
type idleProbe struct {
	rc   syscall.RawConn // nil: the connection has no file descriptor
	look func(fd uintptr) bool
	open bool
	buf  [1]byte
}

func newIdleProbe(c net.Conn) *idleProbe {
	p := &idleProbe{}
	if sc, ok := c.(syscall.Conn); ok {
		p.rc, _ = sc.SyscallConn()
	}
	p.look = func(fd uintptr) bool {
		n, _, err := syscall.Recvfrom(int(fd), p.buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		// Nothing to read: open and quiet. n == 0: the upstream closed
		// it; n > 0: it sent something nobody asked for.
		p.open = n < 0 && (errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EWOULDBLOCK))
		return true
	}
	return p
}

// stillOpen says whether an idle upstream connection can carry another
// request: the upstream has not closed it (an upstream closes idle
// connections after its own keep-alive timeout, often shorter than ours,
// and when it restarts) and sent nothing unasked. It costs one
// non-blocking system call.
func (p *idleProbe) stillOpen() bool {
	if p.rc == nil {
		return true
	}
	p.open = false
	return p.rc.Read(p.look) == nil && p.open
}
