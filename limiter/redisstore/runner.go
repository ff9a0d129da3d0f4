package redisstore

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// Script is a Lua script as the store sends every one of its own: EVALSHA
// of its SHA1, then the whole script with EVAL when the server answers
// NOSCRIPT (a restarted or flushed server, a fresh replica), so that no
// caller loads scripts first. It is the one runner for the scripts around
// the store too (the instance heartbeat's). Safe for concurrent use.
type Script struct{ sc script }

// NewScript returns src as a Script; its SHA1 is computed once.
func NewScript(src string) *Script { return &Script{sc: newScript(src)} }

// Hash is the script's SHA1 in hex, what EVALSHA names it by.
func (s *Script) Hash() string { return s.sc.sha }

// Run runs the script on keys with args through c (a client, a Cluster's
// included, or a pipeline's Cmdable) and returns its command, whose error
// is Redis's (NOSCRIPT only if EVAL failed too) or the connection's.
func (s *Script) Run(ctx context.Context, c redis.Scripter, keys []string, args ...any) *redis.Cmd {
	cmd := c.EvalSha(ctx, s.sc.sha, keys, args...)
	if isNoScript(cmd.Err()) {
		cmd = c.Eval(ctx, s.sc.src, keys, args...)
	}
	return cmd
}
