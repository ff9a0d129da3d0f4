package redisstore

import (
	"bytes"
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// replicaAskEvery spaces the ROLE a write pipelines under DurabilityWait to
// learn the primary's replicas, unless a WAIT no replica answered asks sooner.
const replicaAskEvery = 100 * time.Millisecond

// replicas is what a store under DurabilityWait knows of the primary's
// replicas: a newly promoted primary has none until Sentinel points the
// old one at it (seconds), and a WAIT there could only wait out its
// timeout, holding every batch queued behind it. Lock-free, as every
// write reads it.
type replicas struct {
	// none: the primary listed no online replica when last asked, so
	// writes skip WAIT and are counted unreplicated at once.
	none atomic.Bool
	// nextAsk is the Unix time (ns) from which a write asks again; 0: now.
	nextAsk atomic.Int64
	// primary is the fence's generation (Sentinel) the above was learnt in.
	primary atomic.Pointer[generation]
}

// follow forgets what it knew of an earlier primary's replicas once f (nil:
// none) routes writes to another (see replicas), and asks ROLE at once.
func (r *replicas) follow(f *fence) {
	if f == nil {
		return
	}
	g := f.gen.Load()
	old := r.primary.Load()
	if old == g || !r.primary.CompareAndSwap(old, g) {
		return
	}
	if old != nil {
		r.none.Store(true)
		r.nextAsk.Store(0)
	}
}

// due reports whether the write being sent should ask, claiming the turn.
func (r *replicas) due(now time.Time) bool {
	next := r.nextAsk.Load()
	if now.UnixNano() < next {
		return false
	}
	return r.nextAsk.CompareAndSwap(next, now.Add(replicaAskEvery).UnixNano())
}

// heard records ROLE's reply; a reply that is not a primary's (the
// server is being demoted) changes nothing.
func (r *replicas) heard(role *redis.Cmd) {
	v, err := role.Slice()
	if err != nil || len(v) < 3 || v[0] != "master" {
		return
	}
	online, _ := v[2].([]any)
	r.none.Store(len(online) == 0)
}

// durableCmds are the commands a write's pipeline ends with under
// DurabilityWait: ROLE when due, and WAIT 1 for the durability timeout or
// what ctx leaves of deadline (the earliest of the writes') after a
// quarter kept for the reply's way back, unless the primary had no
// replica or there is no millisecond left (WAIT 0 would block forever).
func (s *Store) durableCmds(ctx context.Context, deadline time.Time) (role *redis.Cmd, wait *redis.IntCmd) {
	s.repl.follow(s.fence)
	now := time.Now()
	if s.repl.due(now) {
		role = redis.NewCmd(ctx, "role")
	}
	if s.repl.none.Load() {
		return role, nil
	}
	d := s.durability
	if !deadline.IsZero() {
		left := deadline.Sub(now)
		d = min(d, left-left/4)
	}
	if ms := d.Milliseconds(); ms >= 1 {
		wait = redis.NewIntCmd(ctx, "wait", 1, ms)
	}
	return role, wait
}

// durableDone reads role and wait (either nil when not sent) after n
// writes that Redis ran: the writes no replica acknowledged (or that did
// not wait, having none to wait for) are counted unreplicated, never
// failed; a WAIT that no replica answered asks ROLE again at once.
func (s *Store) durableDone(role *redis.Cmd, wait *redis.IntCmd, n int) {
	if role != nil {
		s.repl.heard(role)
	}
	if n == 0 {
		return
	}
	var err error
	if wait != nil {
		var acked int64
		acked, err = wait.Result()
		if err == nil && acked >= 1 {
			return
		}
		s.repl.nextAsk.Store(0)
	}
	s.unreplicated.Add(int64(n))
	if s.replObs != nil {
		s.replObs.ObserveUnreplicated(n, err)
	}
}

// sendDurable pipelines cmds (raw reading cmds[i]'s reply, when raw) and
// the durable commands after them.
func (s *Store) sendDurable(ctx context.Context, via processor, deadline time.Time, cmds []redis.Cmder, raws []*bytes.Buffer) (*redis.Cmd, *redis.IntCmd) {
	role, wait := s.durableCmds(ctx, deadline)
	pipe := via.Pipeline()
	for _, c := range cmds {
		_ = pipe.Process(ctx, c)
	}
	if role != nil {
		_ = pipe.Process(ctx, role)
	}
	if wait != nil {
		_ = pipe.Process(ctx, wait)
	}
	_, _ = pipe.Exec(ctx)
	if wait != nil && wait.Err() != nil && !isRedisError(wait.Err()) {
		s.keepRan(via, wait.Err(), cmds, raws)
	}
	return role, wait
}

// keepRan keeps the replies of cmds that arrived whole before the
// pipeline's read failed at err (WAIT outliving the deadline: Redis fires
// blocked-command timeouts on its event loop's tick, up to 1/hz late):
// go-redis gave every command err, but Redis ran those writes, and a
// WAIT's timeout is no store failure. The connection is marked spoiled.
func (s *Store) keepRan(via processor, err error, cmds []redis.Cmder, raws []*bytes.Buffer) {
	if c, ok := via.(*redis.Conn); ok {
		s.spoiled.Store(c, err)
	}
	for i, c := range cmds {
		raw, ok := c.(*redis.RawWriteToCmd)
		if !ok || i >= len(raws) || raw.Err() != err || raws[i].Len() == 0 {
			continue
		}
		if _, perr := parseInts(raws[i].Bytes(), nil); perr == nil {
			raw.SetErr(nil)
		}
	}
}

// isRedisError reports whether err is a reply of Redis's, not a failure
// to reach it.
func isRedisError(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}

// spoiledErr is the error that broke c's last read although its call
// succeeded (keepRan), nil if none; it forgets it.
func (s *Store) spoiledErr(c *redis.Conn) error {
	if c == nil {
		return nil
	}
	if err, ok := s.spoiled.LoadAndDelete(c); ok {
		return err.(error)
	}
	return nil
}

// ranScript reports whether raw holds a script's reply, not an error
// reply (NOSCRIPT, sent again and counted then).
func ranScript(raw *bytes.Buffer) bool {
	return raw.Len() > 0 && raw.Bytes()[0] != '-'
}
