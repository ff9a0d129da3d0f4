//go:build !unix

package server

import "net"

// directPath says whether this platform has the direct path: not here,
// where an idle connection cannot be peeked at without blocking, so every
// request goes through http.Transport.
const directPath = false

type idleProbe struct{}

func newIdleProbe(net.Conn) *idleProbe { return nil }

func (*idleProbe) stillOpen() bool { return false }
