//go:build !unix

package proxy

import "net"

// directPath is false where an idle connection cannot be peeked at without
// blocking: every request goes through http.Transport.
const directPath = false

type idleProbe struct{}

func newIdleProbe(net.Conn) *idleProbe { return nil }

func (*idleProbe) stillOpen() bool { return false }

func (*idleProbe) sendThenAwait([]byte) (int, error) { return 0, nil }
