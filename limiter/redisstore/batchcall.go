package redisstore

import (
	"fmt"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// BatchCall is one batch-script call as the store's batches send it,
// ready for any client: Args is the EVALSHA command (go-redis arguments)
// and Src the script, for EVAL after NOSCRIPT.
type BatchCall struct {
	Args []any
	Src  string
}

// BatchCall returns the batch-script call that decides cost 1 under lim
// on each of keys (in ModeConsume, in this order), as a sender would send
// them in one batch: what a client with no limiter code around it sends
// to measure what Redis alone can decide. Safe for concurrent use.
func (s *Store) BatchCall(lim limiter.Limit, keys []string) (BatchCall, error) {
	if err := lim.Validate(); err != nil {
		return BatchCall{}, fmt.Errorf("redis store: limit: %w", err)
	}
	if len(keys) == 0 {
		return BatchCall{}, fmt.Errorf("redis store: a batch call needs a key")
	}
	sc := &s.algs[limiter.SpecOf(lim.Algorithm).Index()]
	g := group{fam: sc.spec.Index(), members: make([]*request, len(keys))}
	for i, key := range keys {
		g.members[i] = new(request)
		s.fill(g.members[i], sc, key, lim, 1, limiter.ModeConsume)
	}
	var e encoder
	e.reserve([]group{g})
	cmd := e.encode(nil, sc, &g)
	// The encoder points into the requests; the call owns its values.
	for i, a := range cmd {
		switch v := a.(type) {
		case *string:
			cmd[i] = *v
		case *int64:
			cmd[i] = *v
		}
	}
	return BatchCall{Args: cmd, Src: sc.batch.src}, nil
}
