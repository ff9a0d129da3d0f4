package redistest

import (
	"fmt"
	"net"
	"syscall"
	"unsafe"
)

// setBacklog sets the accept backlog of the listening socket of l: listen(2)
// on a socket already listening changes only its backlog.
func setBacklog(l *net.TCPListener, backlog int) error {
	rc, err := l.SyscallConn()
	if err != nil {
		return fmt.Errorf("set backlog: %w", err)
	}
	var lerr error
	if err := rc.Control(func(fd uintptr) { lerr = syscall.Listen(int(fd), backlog) }); err != nil {
		return fmt.Errorf("set backlog: %w", err)
	}
	if lerr != nil {
		return fmt.Errorf("set backlog to %d: %w", backlog, lerr)
	}
	return nil
}

// acceptQueue returns how many connections wait in l's accept queue and the
// backlog of the listening socket: Linux reports both in TCP_INFO of a
// listening socket (tcpi_unacked, tcpi_sacked), and counts the queue full,
// dropping SYNs, when queued > backlog.
func acceptQueue(l *net.TCPListener) (queued, backlog int, err error) {
	rc, err := l.SyscallConn()
	if err != nil {
		return 0, 0, fmt.Errorf("accept queue: %w", err)
	}
	var info syscall.TCPInfo
	size := uint32(unsafe.Sizeof(info))
	var errno syscall.Errno
	if err := rc.Control(func(fd uintptr) {
		_, _, errno = syscall.Syscall6(syscall.SYS_GETSOCKOPT, fd, syscall.IPPROTO_TCP, syscall.TCP_INFO,
			uintptr(unsafe.Pointer(&info)), uintptr(unsafe.Pointer(&size)), 0)
	}); err != nil {
		return 0, 0, fmt.Errorf("accept queue: %w", err)
	}
	if errno != 0 {
		return 0, 0, fmt.Errorf("accept queue: getsockopt TCP_INFO: %w", errno)
	}
	return int(info.Unacked), int(info.Sacked), nil
}
