package server

import (
	"context"
	"net"
	"net/http"
)

// How the direct path stops an upstream exchange when its client goes away. net/http
// cancels a request's context when a read or a write on the client's connection fails
// (its background read sees the client hang up), or after the handler returns. Rather
// than register on every request's context (context.AfterFunc allocates the watcher
// and the context's table of children, and takes locks), the exchange registers on
// the client's slowClientConn, which sees that same failure first and aborts it. This
// holds only while the request's context is cancelled by nothing else: when a handler
// in between gave it a cancellation of its own, or the connection is not a
// slowClientConn, the exchange registers on the context.

type clientConnKey struct{}

// slowClientConnContext is the ConnContext hook: it puts the slowClientConn in its
// requests' contexts.
func slowClientConnContext(ctx context.Context, c net.Conn) context.Context {
	if sc, ok := c.(*slowClientConn); ok {
		return context.WithValue(ctx, clientConnKey{}, sc)
	}
	return ctx
}

// noteRequest records r's context as net/http's own for the request served on its
// connection, when that is a slowClientConn. The listener's outermost handler calls
// it, on the request's goroutine, before any handler derives r's context.
func noteRequest(r *http.Request) {
	if r.ProtoMajor != 1 {
		return // HTTP/1 serves one request at a time on a connection
	}
	if c, _ := r.Context().Value(clientConnKey{}).(*slowClientConn); c != nil {
		c.req = r.Context()
	}
}

// clientConnOf returns the connection whose failure alone (beside the handler's
// return) cancels ctx, or nil.
func clientConnOf(ctx context.Context) *slowClientConn {
	c, _ := ctx.Value(clientConnKey{}).(*slowClientConn)
	if c == nil || c.req == nil {
		return nil
	}
	// A context derived with values only has its parent's Done channel.
	if ctx != c.req && ctx.Done() != c.req.Done() {
		return nil
	}
	return c
}

// goneAway notes that net/http is cancelling the connection's requests and
// aborts the exchange in flight for one.
func (c *slowClientConn) goneAway() {
	c.gone.Store(true)
	if pc := c.inflight.Swap(nil); pc != nil {
		pc.abort()
	}
}
