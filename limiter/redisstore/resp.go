package redisstore

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// redisError is an error reply of Redis, read from a raw reply.
type redisError string

func (e redisError) Error() string { return string(e) }

// RedisError marks it as a reply of the server, as go-redis's own errors are.
func (e redisError) RedisError() {}

// isNoScript reports whether err is EVALSHA's NOSCRIPT.
func isNoScript(err error) bool {
	if err == nil {
		return false
	}
	if re, ok := err.(redisError); ok {
		return strings.HasPrefix(string(re), "NOSCRIPT")
	}
	return strings.HasPrefix(err.Error(), "NOSCRIPT")
}

// parseInts reads a raw RESP array of integers into dst without
// allocating; an error reply is a redisError.
func parseInts(raw []byte, dst []int64) ([]int64, error) {
	dst = dst[:0]
	if len(raw) == 0 {
		return dst, errors.New("empty reply")
	}
	if raw[0] == '-' || raw[0] == '!' {
		return dst, redisError(strings.TrimRight(string(raw[1:]), "\r\n"))
	}
	if raw[0] != '*' {
		return dst, fmt.Errorf("unexpected reply %.40q, want an array of integers", raw)
	}
	n, rest, ok := parseLineInt(raw[1:])
	if !ok || n < 0 {
		return dst, fmt.Errorf("unexpected reply %.40q, want an array of integers", raw)
	}
	for i := int64(0); i < n; i++ {
		if len(rest) == 0 || rest[0] != ':' {
			return dst, fmt.Errorf("unexpected reply element %d %.20q, want an integer", i, rest)
		}
		var v int64
		v, rest, ok = parseLineInt(rest[1:])
		if !ok {
			return dst, fmt.Errorf("unexpected reply element %d, want an integer", i)
		}
		dst = append(dst, v)
	}
	if len(rest) != 0 {
		return dst, fmt.Errorf("unexpected %d bytes after the reply", len(rest))
	}
	return dst, nil
}

// parseLineInt reads a decimal integer terminated by "\r\n".
func parseLineInt(b []byte) (v int64, rest []byte, ok bool) {
	neg := false
	i := 0
	if i < len(b) && b[i] == '-' {
		neg = true
		i++
	}
	start := i
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		if i-start >= 18 {
			return 0, nil, false
		}
		v = v*10 + int64(b[i]-'0')
	}
	if i == start || i+1 >= len(b) || b[i] != '\r' || b[i+1] != '\n' {
		return 0, nil, false
	}
	if neg {
		v = -v
	}
	return v, b[i+2:], true
}

// decodeInts turns one decision's five integers into a Decision.
func decodeInts(n []int64) (limiter.Decision, error) {
	if len(n) != replyLen {
		return limiter.Decision{}, fmt.Errorf("unexpected reply of %d elements, want %d", len(n), replyLen)
	}
	for i, x := range n {
		if x < 0 {
			return limiter.Decision{}, fmt.Errorf("unexpected reply element %d: negative value %d", i, x)
		}
	}
	return limiter.Decision{
		Allowed:    n[0] > 0,
		Admitted:   n[0],
		Remaining:  n[1],
		ResetAfter: time.Duration(n[2]) * time.Microsecond,
		RetryAfter: time.Duration(n[3]) * time.Microsecond,
		Delay:      time.Duration(n[4]) * time.Microsecond,
	}, nil
}

// anyInts converts a go-redis array of integers into dst.
func anyInts(reply any, dst []int64) ([]int64, error) {
	dst = dst[:0]
	vals, ok := reply.([]any)
	if !ok {
		return dst, fmt.Errorf("unexpected reply of type %T, want an array of integers", reply)
	}
	for i, v := range vals {
		x, ok := v.(int64)
		if !ok {
			return dst, fmt.Errorf("unexpected reply element %d of type %T, want an integer", i, v)
		}
		dst = append(dst, x)
	}
	return dst, nil
}
