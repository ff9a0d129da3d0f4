package server

import (
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

// The handler bounds the body, not http.Server.ReadTimeout: net/http keeps that
// deadline while the handler runs, and its background read then cancels the
// request's context, cutting off a slow upstream's answer or a leaky_bucket delay.
//
// A body read to its end stays at its end: net/http drains and closes a request's
// body when the answer's first bytes are written, while the proxy's transport, which
// sent the whole body already, may still read it once more (to check it is no longer
// than its Content-Length, or the end of a body replayed after an estimate). Were that
// read to fail on the closed body, the transport would drop the upstream connection
// and the answer streaming on it.

// readDeadliner is the part of net/http's ResponseWriter that moves the read deadline.
type readDeadliner interface {
	SetReadDeadline(time.Time) error
}

// deadlineBody puts r's body under a deadline of timeout from its first read, and nothing
// else under it; the handler calls the returned done once it returns. A request without a
// body, or on a writer that cannot move the read deadline (not net/http's HTTP/1 one), is
// left to the server: done is then nil.
func deadlineBody(w http.ResponseWriter, r *http.Request, timeout time.Duration) (done func()) {
	rd, ok := w.(readDeadliner)
	if !ok || r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	b := &requestBody{ReadCloser: r.Body, conn: rd, timeout: timeout}
	r.Body = b
	return b.handlerDone
}

// requestBody is a request body read under a deadline, remembering why it
// failed. Its methods are safe for concurrent use (the proxy's transport
// reads it on a goroutine of its own, possibly after the handler returned).
type requestBody struct {
	io.ReadCloser
	conn    readDeadliner
	timeout time.Duration

	mu      sync.Mutex
	started bool // the deadline is set
	ended   bool // EOF or an error was seen
	eof     bool // the first error was EOF: every later read is EOF too
	done    bool // the handler returned: the connection is not ours to change
}

func (b *requestBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	if b.eof {
		b.mu.Unlock()
		return 0, io.EOF
	}
	if !b.started && !b.done {
		b.started = true
		_ = b.conn.SetReadDeadline(time.Now().Add(b.timeout))
	}
	b.mu.Unlock()
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.mu.Lock()
		if !b.ended {
			b.ended = true
			b.eof = errors.Is(err, io.EOF)
			if b.eof {
				// Read in full: the connection's background read, waiting
				// for the next request, must not time out.
				if !b.done {
					_ = b.conn.SetReadDeadline(time.Time{})
				}
			}
		}
		b.mu.Unlock()
		if !errors.Is(err, io.EOF) {
			err = &BodyError{Err: err}
		}
	}
	return n, err
}

// BodyError is a failure to read a request's body from the client (a bad chunk
// size, a client too slow for ReadTimeout), so that whoever reads the body (the
// proxy, the decision API) knows the failure as the client's.
type BodyError struct{ Err error }

// Error is the underlying error's message.
func (e *BodyError) Error() string { return e.Err.Error() }

// Unwrap returns the underlying error.
func (e *BodyError) Unwrap() error { return e.Err }

// handlerDone bounds what net/http still reads of a body the handler did
// not read (it discards up to 256 KiB to keep the connection), and stops
// further deadline changes.
func (b *requestBody) handlerDone() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.started {
		b.started = true
		_ = b.conn.SetReadDeadline(time.Now().Add(b.timeout))
	}
	b.done = true
}

// isTimeout reports whether err is a read deadline expiring.
func isTimeout(err error) bool {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
