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
// A body read to its end stays at its end: net/http closes it when the answer starts,
// yet the proxy's transport may read it once more (checking Content-Length); a failure
// there would drop the upstream connection and the answer streaming on it.

type readDeadliner interface {
	SetReadDeadline(time.Time) error
}

// deadlineBody puts r's body under a deadline of timeout from its first read; the handler
// calls done once it returns. done is nil when there is no body or the writer cannot move
// the read deadline (not net/http's HTTP/1 one).
func deadlineBody(w http.ResponseWriter, r *http.Request, timeout time.Duration) (done func()) {
	rd, ok := w.(readDeadliner)
	if !ok || r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	b := &requestBody{ReadCloser: r.Body, conn: rd, timeout: timeout}
	r.Body = b
	return b.handlerDone
}

// requestBody is safe for concurrent use: the proxy's transport reads it on a
// goroutine of its own, possibly after the handler returned.
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

// BodyError is the client's failure to send a request's body (a bad chunk size, too
// slow for ReadTimeout), so that its readers (proxy, decision API) can tell it.
type BodyError struct{ Err error }

// Error is the underlying error's message.
func (e *BodyError) Error() string { return e.Err.Error() }

// Unwrap returns the underlying error.
func (e *BodyError) Unwrap() error { return e.Err }

// handlerDone bounds net/http's discarding of an unread body (up to 256 KiB, to keep
// the connection), and stops further deadline changes.
func (b *requestBody) handlerDone() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.started {
		b.started = true
		_ = b.conn.SetReadDeadline(time.Now().Add(b.timeout))
	}
	b.done = true
}

func isTimeout(err error) bool {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
