package redisstore

import (
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// connIdle is how long an ownConn is kept unused (then the pool's checkout
// catches a connection closed while idle).
const connIdle = 50 * time.Millisecond

// ownConn is a single-server connection kept by one user across calls, saving the pool's
// checkout and its health-check system call; closed after an error or connIdle. Safe for
// concurrent use; one caller at a time holds it.
type ownConn struct {
	client *redis.Client // nil: not a single-server client

	mu       sync.Mutex
	busy     bool
	held     *redis.Conn
	warm     bool // held has made a call without error
	lastUsed time.Time
}

// take returns the connection (nil: no client, or in use) for give; warm: a call on it
// succeeded, so the next waits for no pool.
func (o *ownConn) take() (c *redis.Conn, warm bool) {
	if o.client == nil {
		return nil, false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.busy {
		return nil, false
	}
	now := time.Now()
	if o.held != nil && now.Sub(o.lastUsed) > connIdle {
		_ = o.held.Close()
		o.held, o.warm = nil, false
	}
	if o.held == nil {
		o.held = o.client.Conn()
	}
	o.busy, o.lastUsed = true, now
	return o.held, o.warm
}

// give hands back c after a call that ended with err (closed on error).
func (o *ownConn) give(c *redis.Conn, err error) {
	if c == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if c == o.held {
		o.busy = false
		o.warm = err == nil
		if err != nil {
			_ = o.held.Close()
			o.held = nil
		}
	}
}

func (o *ownConn) close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.held != nil {
		_ = o.held.Close()
		o.held = nil
	}
	o.busy, o.warm = false, false
}

// closeIdle gives the connection back unless a call holds it (its caller's give keeps it then).
func (o *ownConn) closeIdle() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.held != nil && !o.busy {
		_ = o.held.Close()
		o.held, o.warm = nil, false
	}
}
