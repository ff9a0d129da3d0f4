//go:build !linux

package redistest

import (
	"errors"
	"net"
)

// errNoBlackHole: making new connections hang relies on how Linux treats a
// SYN that finds a full accept queue.
var errNoBlackHole = errors.New("a black-holed link needs Linux")

func setBacklog(*net.TCPListener, int) error { return errNoBlackHole }

// acceptQueue reports nothing outside Linux; Relay still works there, only
// BlackHole fails.
func acceptQueue(*net.TCPListener) (queued, backlog int, err error) { return 0, 0, nil }
