package redisstore

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// Script is a Lua script sent as the store sends its own: EVALSHA, then EVAL on
// NOSCRIPT (a restarted or flushed server, a fresh replica), so that no caller loads
// scripts first. Safe for concurrent use.
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

// ScriptCall is the keys and arguments of one call in RunPipelined.
type ScriptCall struct {
	Keys []string
	Args []any
}

// RunPipelined runs the script once per call in one pipeline of c, after the commands
// before queues (nil: none). On NOSCRIPT the pipeline goes again with EVAL, before's
// commands included, so they must bear being sent twice. Safe for concurrent use.
func (s *Script) RunPipelined(ctx context.Context, c redis.UniversalClient, before func(redis.Pipeliner), calls []ScriptCall) ([]*redis.Cmd, error) {
	cmds := make([]*redis.Cmd, len(calls))
	for attempt := 0; ; attempt++ {
		pipe := c.Pipeline()
		if before != nil {
			before(pipe)
		}
		for i, call := range calls {
			if attempt == 0 {
				cmds[i] = pipe.EvalSha(ctx, s.sc.sha, call.Keys, call.Args...)
			} else {
				cmds[i] = pipe.Eval(ctx, s.sc.src, call.Keys, call.Args...)
			}
		}
		_, err := pipe.Exec(ctx)
		if attempt == 0 && isNoScript(err) {
			continue
		}
		return cmds, err
	}
}
