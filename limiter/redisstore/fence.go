package redisstore

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// errFenced is a write refused, before any byte left, on a connection to a
// primary being demoted: nothing ran, so the call goes again to the promoted one.
var errFenced = errors.New("redis sentinel: the primary is being demoted; nothing was sent")

// sentinelEvents are the channels a fence follows on every Sentinel: the
// replica chosen, REPLICAOF NO ONE sent to it, the replica reporting
// itself primary, the new configuration, and a failover given up.
var sentinelEvents = []string{
	"+failover-state-send-slaveof-noone", "+failover-state-wait-promotion", "+promoted-slave", "+switch-master",
	"-failover-abort-slave-timeout", "-failover-abort-not-elected", "-failover-abort-no-good-slave",
}

// promotionProbeEvery is how often a fence asks the replica being
// promoted (ROLE) whether it takes writes yet: Sentinel learns it from
// INFO, up to a second later.
const promotionProbeEvery = 2 * time.Millisecond

// route is where writes may go: to master alone ("" before the fence
// knows it: anywhere go-redis dials), or, while fenced, nowhere until
// open is closed.
type route struct {
	master string
	fenced bool
	open   chan struct{} // closed when the fence lifts; nil when not fenced
}

// fence keeps a Sentinel-managed primary's writes off a primary being
// demoted: go-redis follows +switch-master on one Sentinel, up to a second
// after the replica took writes, and every write the old primary took
// meanwhile is lost when it resyncs as a replica. A fence follows the
// promotion itself on every Sentinel; from its first sign on no byte goes
// to the old primary (fencedConn), and new connections wait for the
// promoted one. Calls on their way at that instant may still land on the
// old primary: a generation counts them (Store.Unconfirmed). Safe for
// concurrent use.
type fence struct {
	masterName string
	sentinels  []string
	sentOpt    redis.Options // a Sentinel's options, Addr unset
	dataOpt    redis.Options // a data node's (to probe a promotion), Addr unset
	log        *slog.Logger

	route atomic.Pointer[route]
	gen   atomic.Pointer[generation]

	mu      sync.Mutex // orders route changes
	demoted string     // the primary fenced off last
	raised  time.Time  // when the fence was raised last
	started bool
	ctx     context.Context
	stop    context.CancelFunc
	wg      sync.WaitGroup

	wmu     sync.Mutex
	windows []window // the last keptWindows, oldest first
}

// keptWindows is how many failover windows a fence remembers (for tests).
const keptWindows = 8

// window is when calls may have landed on a demoted primary: from the
// promotion seen to the last call on its way then.
type window struct {
	start, end  time.Time
	unconfirmed int64
}

// generation is the calls sent while one primary took writes; once stale
// (a promotion seen), those still on their way are counted, and the window
// is logged when the last ends.
type generation struct {
	inflight    atomic.Int64
	stale       atomic.Bool
	unconfirmed atomic.Int64
	logged      atomic.Bool
	demoted     string
	start       time.Time // when the promotion was seen
}

func newFence(masterName string, sentinels []string, sentOpt, dataOpt redis.Options, log *slog.Logger) *fence {
	if log == nil {
		log = slog.Default()
	}
	f := &fence{masterName: masterName, sentinels: sentinels, sentOpt: sentOpt, dataOpt: dataOpt, log: log}
	f.route.Store(&route{})
	f.gen.Store(&generation{})
	f.ctx, f.stop = context.WithCancel(context.Background())
	return f
}

// watch subscribes to every Sentinel, once.
func (f *fence) watch() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.started || f.ctx.Err() != nil {
		return
	}
	f.started = true
	for _, addr := range f.sentinels {
		f.wg.Add(1)
		go f.follow(addr)
	}
}

// follow hears one Sentinel's events until the fence is closed; go-redis
// subscribes again after a broken connection.
func (f *fence) follow(addr string) {
	defer f.wg.Done()
	o := f.sentOpt
	o.Addr = addr
	sc := redis.NewSentinelClient(&o)
	defer sc.Close()
	ps := sc.Subscribe(f.ctx, sentinelEvents...)
	defer ps.Close()
	ch := ps.Channel()
	for {
		select {
		case <-f.ctx.Done():
			return
		case m, ok := <-ch:
			if !ok {
				return
			}
			f.heard(m.Channel, m.Payload)
		}
	}
}

// close stops following the Sentinels and waits for it.
func (f *fence) close() {
	f.mu.Lock()
	f.stop()
	if r := f.route.Load(); r.fenced {
		close(r.open)
		f.route.Store(&route{master: r.master})
	}
	f.mu.Unlock()
	f.wg.Wait()
}

// heard acts on one Sentinel event about this master.
func (f *fence) heard(channel, payload string) {
	p := strings.Fields(payload)
	switch channel {
	case "+failover-state-send-slaveof-noone", "+failover-state-wait-promotion", "+promoted-slave":
		// <type> <name> <ip> <port> @ <master> <ip> <port>
		if len(p) < 8 || p[5] != f.masterName {
			return
		}
		promoted, demoted := net.JoinHostPort(p[2], p[3]), net.JoinHostPort(p[6], p[7])
		switch channel {
		case "+failover-state-send-slaveof-noone":
			f.arm(demoted, promoted)
		case "+failover-state-wait-promotion":
			f.raise(demoted, promoted)
		default:
			f.lift(promoted, demoted)
		}
	case "+switch-master":
		// <master> <old ip> <old port> <new ip> <new port>
		if len(p) < 5 || p[0] != f.masterName {
			return
		}
		f.lift(net.JoinHostPort(p[3], p[4]), net.JoinHostPort(p[1], p[2]))
	default: // -failover-abort-*: master <name> <ip> <port>
		if len(p) < 4 || p[1] != f.masterName {
			return
		}
		f.lift(net.JoinHostPort(p[2], p[3]), "")
	}
}

// arm opens the window: Sentinel chose the replica to promote and sends
// it REPLICAOF NO ONE on its next tick (up to ~100 ms on). Writes still go
// to demoted, which streams them to the replica, but count unconfirmed
// until the route turns; a probe watches for promoted taking writes.
func (f *fence) arm(demoted, promoted string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.route.Load()
	g := f.gen.Load()
	if r.fenced || r.master == promoted || g.stale.Load() || f.ctx.Err() != nil {
		return
	}
	f.log.Warn("redis sentinel: promotion begun; decisions made from now until the promoted primary takes them are counted unconfirmed",
		"master", f.masterName, "demoted", demoted, "promoted", promoted)
	g.demoted, g.start = demoted, time.Now()
	g.stale.Store(true)
	f.wg.Add(1)
	go f.probe(promoted)
}

// raise fences demoted off: Sentinel has sent REPLICAOF NO ONE, so no
// write goes to demoted from now on, and new connections wait for
// promoted until the probe sees it take writes.
func (f *fence) raise(demoted, promoted string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.route.Load()
	if r.fenced || r.master == promoted || f.ctx.Err() != nil {
		return
	}
	f.route.Store(&route{fenced: true, open: make(chan struct{})})
	f.raised = time.Now()
	if !f.gen.Load().stale.Load() {
		// The promotion's first step went unheard: probe now.
		f.wg.Add(1)
		go f.probe(promoted)
	}
	f.turn(demoted)
}

// lift routes writes to master (the promoted primary, or the old one
// again when the failover was given up); the calls of the generation
// before, on their way to another primary, are counted.
func (f *fence) lift(master, demoted string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.route.Load()
	armed := f.gen.Load().stale.Load()
	if r.master == master && !r.fenced && !armed {
		return
	}
	if armed || r.master != "" {
		f.turn(cmpOr(demoted, r.master))
	}
	f.route.Store(&route{master: master})
	if r.fenced {
		close(r.open)
		f.log.Info("redis sentinel: the promoted primary takes the decisions",
			"master", f.masterName, "primary", master, "fenced_for", time.Since(f.raised))
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// turn starts a new generation: every later call of the current one,
// already stale when armed, is counted unconfirmed. Under f.mu.
func (f *fence) turn(demoted string) {
	old := f.gen.Swap(&generation{})
	if !old.stale.Load() {
		old.demoted, old.start = demoted, time.Now()
		old.stale.Store(true)
	}
	f.demoted = old.demoted
	if old.inflight.Load() == 0 {
		f.closeWindow(old)
	}
}

// enter registers a call about to be sent, for leave.
func (f *fence) enter() *generation {
	g := f.gen.Load()
	g.inflight.Add(1)
	return g
}

// leave ends a call of generation g whose n writes ran; it returns how
// many of them may have landed on a demoted primary.
func (f *fence) leave(g *generation, n int) int {
	unconfirmed := 0
	if n > 0 && g.stale.Load() {
		unconfirmed = n
		g.unconfirmed.Add(int64(n))
	}
	// An armed generation is stale while still current: its window
	// closes once it is turned (turn) and its last call has ended.
	if g.inflight.Add(-1) == 0 && g.stale.Load() && f.gen.Load() != g {
		f.closeWindow(g)
	}
	return unconfirmed
}

// closeWindow logs, once, the window in which g's calls may have landed
// on the demoted primary.
func (f *fence) closeWindow(g *generation) {
	if !g.logged.CompareAndSwap(false, true) {
		return
	}
	end := time.Now()
	f.wmu.Lock()
	f.windows = append(f.windows[len(f.windows)-min(len(f.windows), keptWindows-1):], window{start: g.start, end: end, unconfirmed: g.unconfirmed.Load()})
	f.wmu.Unlock()
	f.log.Warn("redis sentinel: failover window closed; decisions made in it may be missing on the promoted primary",
		"master", f.masterName, "demoted", g.demoted, "start", g.start, "end", end,
		"duration", end.Sub(g.start), "unconfirmed", g.unconfirmed.Load())
}

// writable reports whether a connection to addr may write.
func (f *fence) writable(addr string) bool {
	r := f.route.Load()
	return !r.fenced && (r.master == "" || r.master == addr)
}

// probe asks promoted its role until it is a primary, then routes writes to it.
func (f *fence) probe(promoted string) {
	defer f.wg.Done()
	o := f.dataOpt
	o.Addr, o.MaxRetries, o.PoolSize = promoted, -1, 1
	c := redis.NewClient(&o)
	defer c.Close()
	t := time.NewTicker(promotionProbeEvery)
	defer t.Stop()
	for {
		if r := f.route.Load(); !r.fenced && r.master != "" && !f.gen.Load().stale.Load() {
			return // settled: on promoted, or back on the old primary
		}
		ctx, cancel := context.WithTimeout(f.ctx, 100*time.Millisecond)
		v, err := c.Do(ctx, "role").Slice()
		cancel()
		if err == nil && len(v) > 0 && v[0] == "master" {
			f.lift(promoted, "")
			return
		}
		select {
		case <-f.ctx.Done():
			return
		case <-t.C:
		}
	}
}

// fenceHook is the data client's dial hook: the fence's own dialling
// around go-redis's (which asks a Sentinel for the primary).
type fenceHook struct{ f *fence }

func (h fenceHook) DialHook(next redis.DialHook) redis.DialHook { return h.f.dialVia(next) }

func (fenceHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (fenceHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// dialVia starts following the Sentinels, waits while fenced (until ctx's
// deadline), dials through next, and hands out a fencedConn to the primary
// the fence knows, dialling it instead when next reached another (a
// Sentinel not switched yet still names the demoted one).
func (f *fence) dialVia(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		f.watch()
		if err := f.wait(ctx); err != nil {
			return nil, err
		}
		c, err := next(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		got := c.RemoteAddr().String()
		want := f.adopt(got)
		if want != got {
			_ = c.Close()
			if c, err = f.dial(ctx, network, want); err != nil {
				return nil, err
			}
		}
		return &fencedConn{Conn: c, f: f, addr: want}, nil
	}
}

// dial connects to addr as go-redis would.
func (f *fence) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{Timeout: f.dataOpt.DialTimeout, KeepAlive: 5 * time.Minute}
	if f.dataOpt.TLSConfig == nil {
		return d.DialContext(ctx, network, addr)
	}
	return (&tls.Dialer{NetDialer: d, Config: f.dataOpt.TLSConfig}).DialContext(ctx, network, addr)
}

// adopt returns the primary a new connection goes to, given that a
// Sentinel named named: the fence's, unless it knows none or named is
// not the primary it demoted last (then the Sentinels switched while the
// fence heard nothing: it follows them).
func (f *fence) adopt(named string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.route.Load()
	if r.fenced || r.master == named || (r.master != "" && named == f.demoted) {
		return cmpOr(r.master, named)
	}
	if r.master != "" {
		f.turn(r.master)
	}
	f.route.Store(&route{master: named})
	return named
}

// wait waits out a fence, until ctx's deadline (timed here too: a
// deadlineCtx has no Done).
func (f *fence) wait(ctx context.Context) error {
	var expired <-chan time.Time
	if dl, ok := ctx.Deadline(); ok {
		t := time.NewTimer(time.Until(dl))
		defer t.Stop()
		expired = t.C
	}
	for {
		r := f.route.Load()
		if !r.fenced {
			return nil
		}
		select {
		case <-r.open:
		case <-ctx.Done():
			return fmt.Errorf("redis sentinel: waiting for the promoted primary: %w", ctx.Err())
		case <-expired:
			return fmt.Errorf("redis sentinel: waiting for the promoted primary: %w", context.DeadlineExceeded)
		}
	}
}

// fencedConn is a connection that refuses to write once its primary is
// fenced off, before any byte leaves.
type fencedConn struct {
	net.Conn
	f    *fence
	addr string
}

func (c *fencedConn) Write(b []byte) (int, error) {
	if !c.f.writable(c.addr) {
		return 0, errFenced
	}
	return c.Conn.Write(b)
}

// ranOne is the writes of a call that ended with err: none if it failed (one
// whose reply was lost may have run; the fail policy answers for it).
func ranOne(err error) int {
	if err != nil {
		return 0
	}
	return 1
}

// afterFence sends again, through the client's pool, a call whose write
// the fence refused (nothing ran): stale connections are refused in turn
// and dropped, new ones wait for the promoted primary. It gives up at
// ctx's deadline; send returns how many writes ran and the call's error.
func (s *Store) afterFence(ctx context.Context, send func(ctx context.Context) (int, error)) error {
	if dl, ok := ctx.Deadline(); ok {
		// A deadlineCtx has no Done, which the pool and the dial wait on.
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, dl)
		defer cancel()
	}
	err := errFenced
	for fenced(err) && ctx.Err() == nil {
		g := s.enter()
		var n int
		n, err = send(ctx)
		s.leave(g, n)
	}
	return err
}
