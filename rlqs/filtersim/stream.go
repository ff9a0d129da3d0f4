package filtersim

import (
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// reportLoop reports every bucket each interval, restarting a broken stream first; reports made
// while no stream can be opened are dropped, their counts reset, as Envoy's are.
func (c *Client) reportLoop() {
	t := time.NewTicker(c.cfg.ReportInterval)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-c.ctx.Done():
			return
		case now := <-t.C:
			c.mu.Lock()
			bs := make([]*bucketState, 0, len(c.buckets))
			for _, b := range c.buckets {
				bs = append(bs, b)
			}
			if len(bs) > 0 {
				c.ensureStream()
				c.sendLocked(bs, last)
			}
			c.mu.Unlock()
			last = now
		}
	}
}

// ensureStream opens a stream when there is none, on the first address that takes it; call
// with c.mu held.
func (c *Client) ensureStream() {
	if c.stream != nil || len(c.conns) == 0 {
		return
	}
	for i := range c.conns {
		n := (c.next + i) % len(c.conns)
		st, err := rlqsv3.NewRateLimitQuotaServiceClient(c.conns[n]).StreamRateLimitQuotas(c.ctx)
		if err != nil {
			continue
		}
		c.stream, c.next = st, n
		c.streams++
		c.wg.Go(func() { c.recvLoop(st) })
		return
	}
}

// sendLocked reports bs, resetting their counts; since is the last report's time, for
// time_elapsed in whole seconds. Call with c.mu held.
func (c *Client) sendLocked(bs []*bucketState, since time.Time) {
	msg := &rlqsv3.RateLimitQuotaUsageReports{Domain: c.cfg.Domain}
	for _, b := range bs {
		msg.BucketQuotaUsages = append(msg.BucketQuotaUsages, &rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{
			BucketId: b.id, TimeElapsed: &durationpb.Duration{Seconds: int64(time.Since(since) / time.Second)},
			NumRequestsAllowed: b.allowed, NumRequestsDenied: b.denied,
		})
		b.allowed, b.denied = 0, 0
	}
	if c.stream == nil {
		return
	}
	if err := c.stream.Send(msg); err != nil {
		c.broken(c.stream)
	}
}

// broken forgets st, and tries the next address on the restart; call with c.mu held.
func (c *Client) broken(st any) {
	if c.stream != nil && any(c.stream) == st {
		c.stream = nil
		if len(c.conns) > 0 {
			c.next = (c.next + 1) % len(c.conns)
		}
	}
}

// recvLoop applies the server's answers on st until it ends.
func (c *Client) recvLoop(st rlqsv3.RateLimitQuotaService_StreamRateLimitQuotasClient) {
	for {
		resp, err := st.Recv()
		if err != nil {
			c.mu.Lock()
			c.broken(st)
			c.mu.Unlock()
			return
		}
		now := time.Now()
		c.mu.Lock()
		for _, a := range resp.GetBucketAction() {
			c.onAction(a, now)
		}
		c.mu.Unlock()
	}
}

// onAction applies one bucket action; call with c.mu held.
func (c *Client) onAction(a *rlqsv3.RateLimitQuotaResponse_BucketAction, now time.Time) {
	key := Key(a.GetBucketId().GetBucket())
	b := c.buckets[key]
	if b == nil || len(a.GetBucketId().GetBucket()) == 0 {
		return // a bucket this filter does not hold: logged and ignored
	}
	if a.GetAbandonAction() != nil {
		delete(c.buckets, key)
		return
	}
	qa := a.GetQuotaAssignmentAction()
	if qa == nil {
		return
	}
	s := qa.GetRateLimitStrategy()
	if s.GetRequestsPerTimeUnit() != nil || s.GetStrategy() == nil {
		return // not supported: the previous action stays
	}
	c.apply(b, s, now)
	b.inFallback, b.assigned = false, now
	// The filter arms its expiry timer with the TTL's seconds; unset is 0, an instant expiry.
	b.expires = now.Add(seconds(qa.GetAssignmentTimeToLive()))
}

// apply makes s b's action, keeping b's token bucket when s's is the same (compared as Envoy
// does: max_tokens, tokens_per_fill and the fill interval's nanoseconds).
func (c *Client) apply(b *bucketState, s *typev3.RateLimitStrategy, now time.Time) {
	nb := s.GetTokenBucket()
	switch {
	case nb == nil:
		b.tb = nil
	case b.tb != nil && b.action.GetTokenBucket() != nil && sameBucket(nb, b.action.GetTokenBucket()):
	default:
		b.tb = newTokenBucket(nb, b.tb, now)
	}
	b.action = proto.Clone(s).(*typev3.RateLimitStrategy)
}

func sameBucket(a, b *typev3.TokenBucket) bool {
	return a.GetMaxTokens() == b.GetMaxTokens() && a.GetTokensPerFill().GetValue() == b.GetTokensPerFill().GetValue() &&
		a.GetFillInterval().GetNanos() == b.GetFillInterval().GetNanos()
}

// tokenBucket refills continuously at rate per second up to max, as Envoy's AtomicTokenBucketImpl.
type tokenBucket struct {
	max, tokens, rate float64
	at                time.Time
}

// newTokenBucket is the bucket of tb; it starts full, or with old's share of its tokens.
func newTokenBucket(tb *typev3.TokenBucket, old *tokenBucket, now time.Time) *tokenBucket {
	max := float64(tb.GetMaxTokens())
	rate := float64(tb.GetTokensPerFill().GetValue()) / float64(tb.GetFillInterval().GetSeconds())
	n := &tokenBucket{max: max, tokens: max, rate: rate, at: now}
	if old != nil {
		old.refill(now)
		n.tokens = max * (old.tokens / old.max)
	}
	return n
}

func (t *tokenBucket) refill(now time.Time) {
	t.tokens = min(t.max, t.tokens+t.rate*now.Sub(t.at).Seconds())
	t.at = now
}

func (t *tokenBucket) take(now time.Time) bool {
	t.refill(now)
	if t.tokens < 1 {
		return false
	}
	t.tokens--
	return true
}
