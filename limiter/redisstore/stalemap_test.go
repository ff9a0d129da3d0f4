package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
)

// redisError is an error reply as go-redis returns it.
type redisError string

func (e redisError) Error() string { return string(e) }
func (redisError) RedisError()     {}

var _ redis.Error = redisError("")

func TestWhichClusterErrorsReloadTheSlotMap(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	for _, c := range []struct {
		name   string
		err    error
		reload bool
	}{
		{"a refused connection reloads", fmt.Errorf("redis gcra script: %w", refused), true},
		{"a broken connection reloads", io.EOF, true},
		{"a call past its deadline reloads: the node may be gone", context.DeadlineExceeded, true},
		{"CLUSTERDOWN reloads", redisError("CLUSTERDOWN The cluster is down"), true},
		{"MOVED reloads", redisError("MOVED 3999 127.0.0.1:6381"), true},
		{"READONLY reloads: the node is a replica now", redisError("READONLY You can't write against a read only replica."), true},
		{"a caller's cancellation does not", fmt.Errorf("wrapped: %w", context.Canceled), false},
		{"a script error does not", redisError("ERR Error running script"), false},
		{"NOSCRIPT does not", redisError("NOSCRIPT No matching script"), false},
		{"a reply of the wrong shape does not", errors.New("unexpected reply of type string"), false},
		{"no error does not", nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := redisstore.StaleMapError(c.err); got != c.reload {
				t.Fatalf("staleMapError(%v) = %v, want %v", c.err, got, c.reload)
			}
		})
	}
}
