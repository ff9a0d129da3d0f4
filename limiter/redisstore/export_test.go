package redisstore

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// KeySlot is keySlot, for the Cluster tests.
var KeySlot = keySlot

// StaleMapError is staleMapError, for its table test.
var StaleMapError = staleMapError

// NewTestStore returns a Store made with cfg on a new client built from
// cc; the client is closed when the test ends.
func NewTestStore(t testing.TB, cc ClientConfig, cfg Config) *Store {
	t.Helper()
	c, err := cc.NewClient()
	if err != nil {
		t.Fatalf("new redis client: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	s, err := New(c, cfg)
	if err != nil {
		t.Fatalf("redisstore.New: %v", err)
	}
	return s
}

// BatchCounter is a BatchTracer that counts the decisions a store sent
// together with others, in one script call or one pipeline. Safe for
// concurrent use.
type BatchCounter struct{ n atomic.Int64 }

// TraceBatch counts the members of batches of more than one decision.
func (c *BatchCounter) TraceBatch(batch context.Context, decisions []context.Context) (context.Context, func()) {
	if len(decisions) > 1 {
		c.n.Add(int64(len(decisions)))
	}
	return batch, nil
}

// Batched is how many decisions have been sent together with others so
// far; 0 from a store without batching.
func (c *BatchCounter) Batched() int64 { return c.n.Load() }

// scriptArgs are the ARGV of lim's script for a decision on key, as
// go-redis arguments, for running a script by hand.
func scriptArgs(key string, lim limiter.Limit, cost int64, mode limiter.Mode) []any {
	ints := argsInto(nil, limiter.SpecOf(lim.Algorithm), key, lim, cost, mode)
	args := make([]any, len(ints))
	for i, v := range ints {
		args[i] = v
	}
	return args
}

// scriptsOf returns the scripts of algorithm a.
func (s *Store) scriptsOf(a limiter.Algorithm) *algScripts {
	return &s.algs[limiter.SpecOf(a).Index()]
}

// decodeReply decodes a script's reply as go-redis parsed it, with the
// store's checked conversions: anyInts, then decodeInts.
func decodeReply(reply any) (limiter.Decision, error) {
	ints, err := anyInts(reply, nil)
	if err != nil {
		return limiter.Decision{}, err
	}
	return decodeInts(ints)
}

// SpeedMechanisms are the mechanisms SwitchOff knows, in the order
// BenchmarkSpeedMechanisms measures them.
var SpeedMechanisms = []string{"cache", "compact-args", "raw-replies", "own-conn"}

// SwitchOff turns one speed mechanism of s off, before its first
// decision, for BenchmarkSpeedMechanisms: "cache" (lua/batch.lua's cache
// of the keys a batch shares), "compact-args" (parameter sets sent once,
// one code per decision: encodePlain instead), "raw-replies" (resp.go:
// go-redis's parser instead), "own-conn" (the ownConns: the pool's
// checkout per call instead).
func (s *Store) SwitchOff(mechanism string) error {
	off, ok := speedOffOf[mechanism]
	switch {
	case ok && off.args:
		s.encode = encodePlain
	case ok:
	case mechanism == "raw-replies":
		s.typedReplies = true
		return nil
	case mechanism == "own-conn":
		s.single = nil
		for i := range s.alone {
			s.alone[i].client = nil
		}
		return nil
	default:
		return fmt.Errorf("unknown speed mechanism %q", mechanism)
	}
	for _, spec := range limiter.AlgorithmSpecs() {
		_, batch, err := assemble(spec, redisClock, off)
		if err != nil {
			return err
		}
		s.algs[spec.Index()].batch = newScript(batch)
	}
	return nil
}

// speedOffOf are the batch scripts' mechanisms SwitchOff knows.
var speedOffOf = map[string]speedOff{"cache": {cache: true}, "compact-args": {args: true}}

// ProcessCPU is processCPU, for the benchmarks that report our CPU.
var ProcessCPU = processCPU

// FailoverWindow is when decisions may have landed on a primary a
// Sentinel was demoting, and how many did.
type FailoverWindow struct {
	Start, End  time.Time
	Unconfirmed int64
}

// FailoverWindows are the windows the store's fence closed (nil without
// Sentinel), oldest first.
func (s *Store) FailoverWindows() []FailoverWindow {
	if s.fence == nil {
		return nil
	}
	s.fence.wmu.Lock()
	defer s.fence.wmu.Unlock()
	var ws []FailoverWindow
	for _, w := range s.fence.windows {
		ws = append(ws, FailoverWindow{Start: w.start, End: w.end, Unconfirmed: w.unconfirmed})
	}
	return ws
}
