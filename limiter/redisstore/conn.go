package redisstore

import (
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// connIdle is how long an own connection may sit unused before it goes
// back to the pool, whose check on checkout catches connections closed
// while idle.
const connIdle = 50 * time.Millisecond

// ownConn is a connection of a single-server client kept by one user (a
// sender, or the decisions made alone) across calls, which saves the
// pool's checkout and its health-check system call on every call. After
// any error, or when unused for connIdle, it is closed (returned to the
// pool, or dropped when broken) and the next call takes a fresh one. On
// other clients it holds nothing and callers use the client. Safe for
// concurrent use; the connection itself is used by one caller at a time.
type ownConn struct {
	client *redis.Client // nil: not a single-server client

	mu       sync.Mutex
	busy     bool
	held     *redis.Conn
	warm     bool // held has made a call without error
	lastUsed time.Time
}

// take returns the connection, opening one when none is held, or nil when
// there is no client or another caller is using it. The caller hands it
// back with give. warm says the connection has made a call without error
// since it was opened: go-redis holds a network connection for it, so a
// call on it waits for no pool.
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

// give returns c (from take; nil does nothing) after a call that ended
// with err; after an error the connection is closed.
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

// close returns the connection to the pool.
func (o *ownConn) close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.held != nil {
		_ = o.held.Close()
		o.held = nil
	}
	o.busy, o.warm = false, false
}
