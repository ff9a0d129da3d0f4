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

// ScriptCall is the keys and arguments of one call of a Script in
// RunPipelined.
type ScriptCall struct {
	Keys []string
	Args []any
}

// RunPipelined runs the script once per element of calls in one pipeline
// of c, after the commands before queues (nil: none), and returns each
// call's command and the pipeline's error. When the server answers
// NOSCRIPT the pipeline goes once more, before's commands included, with
// EVAL of the whole script, as Run does for one call: before's commands
// must bear being sent twice. Safe for concurrent use.
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
