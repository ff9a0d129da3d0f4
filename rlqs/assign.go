package rlqs

import (
	"context"
	"log/slog"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/rl-exporter/rl-exporter/quota"
	"github.com/rl-exporter/rl-exporter/rls"
)

// Run divides every bucket's limit and renews every assignment each interval until ctx is done.
// Call it once.
func (s *Service) Run(ctx context.Context) {
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.Tick(ctx)
		}
	}
}

// Tick divides every bucket's limit once and sends each stream its assignments; Run calls it
// every interval. Safe for concurrent use.
func (s *Service) Tick(ctx context.Context) {
	s.mu.Lock()
	bs := make([]*bucket, 0, len(s.buckets))
	for _, b := range s.buckets {
		bs = append(bs, b)
	}
	s.mu.Unlock()
	s.assign(ctx, bs)
}

// plan is what one division of a bucket needs, read under Service.mu.
type plan struct {
	b       *bucket
	rule    rls.QuotaRule
	matched bool
	mine    []quota.Demand
	gone    []string
	streams []*stream
}

// assign divides the limits of bs and sends each of their streams on this replica its
// assignments, one message per stream.
func (s *Service) assign(ctx context.Context, bs []*bucket) {
	now := s.cfg.Now()
	s.mu.Lock()
	plans := make([]plan, 0, len(bs))
	for _, b := range bs {
		p := plan{b: b, rule: b.rule, matched: b.matched, gone: b.gone}
		b.gone = nil
		for st, m := range b.meters {
			p.mine = append(p.mine, m.Demand(st.id, now, s.cfg.Idle))
			p.streams = append(p.streams, st)
			if exp, ok := st.expires[b.key]; ok && now.After(exp) {
				// Envoy has fallen back to its expired_assignment_behavior.
				s.expired[b.rule.Path]++
				delete(st.expires, b.key)
			}
		}
		plans = append(plans, p)
	}
	s.mu.Unlock()
	out := map[*stream][]*rlqsv3.RateLimitQuotaResponse_BucketAction{}
	for _, p := range plans {
		for st, a := range s.settle(ctx, p, now) {
			out[st] = append(out[st], a)
		}
	}
	s.mu.Lock()
	for _, b := range bs {
		if len(b.meters) == 0 && len(b.gone) == 0 && s.buckets[b.key] == b {
			delete(s.buckets, b.key)
		}
	}
	for st, as := range out {
		for _, a := range as {
			if key, err := s.bucketKey(st.domain, a.GetBucketId()); err == nil && st.watched[key] != nil {
				st.expires[key] = now.Add(s.cfg.AssignmentTTL)
			}
		}
	}
	s.mu.Unlock()
	for st, as := range out {
		st.send(as)
	}
}

// settle divides p's bucket and returns the action of each of its streams: ALLOW_ALL with no
// rule (or an unlimited or refused one), DENY_ALL for a blocked one, else the stream's share. A
// store that fails gives no action: the assignments run out unrenewed, counted.
func (s *Service) settle(ctx context.Context, p plan, now time.Time) map[*stream]*rlqsv3.RateLimitQuotaResponse_BucketAction {
	out := make(map[*stream]*rlqsv3.RateLimitQuotaResponse_BucketAction, len(p.streams))
	r := p.rule
	if !p.matched || r.Unlimited || r.Refused != "" || r.Blocked {
		rule := typev3.RateLimitStrategy_ALLOW_ALL
		if p.matched && r.Blocked {
			rule = typev3.RateLimitStrategy_DENY_ALL
		}
		for _, st := range p.streams {
			out[st] = s.action(p.b.id, &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_BlanketRule_{BlanketRule: rule}})
		}
		return out
	}
	all, err := s.cfg.Store.Exchange(ctx, p.b.key, p.mine, p.gone, now, 3*s.cfg.Interval)
	if err != nil {
		s.mu.Lock()
		s.storeErrs++
		s.mu.Unlock()
		s.cfg.Logger.Warn("rlqs: quota store exchange failed; assignments left to run out", slog.String("rule", r.Path), slog.String("error", err.Error()))
		return out
	}
	shares := map[string]quota.Share{}
	for _, sh := range quota.Divide(limitOf(r), all, s.cfg.Quota) {
		shares[sh.Client] = sh
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, st := range p.streams {
		sh, ok := shares[st.id]
		if !ok {
			continue
		}
		if _, watching := p.b.meters[st]; watching {
			p.b.shares[st] = sh.Rate
		}
		tb := &typev3.TokenBucket{MaxTokens: sh.Bucket.MaxTokens, TokensPerFill: wrapperspb.UInt32(sh.Bucket.TokensPerFill),
			FillInterval: durationpb.New(sh.Bucket.FillInterval)}
		out[st] = s.action(p.b.id, &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_TokenBucket{TokenBucket: tb}})
	}
	return out
}

// limitOf is the rate a rule shares: its requests per unit over the unit, its burst (else one
// unit's requests) taken at once at most.
func limitOf(r rls.QuotaRule) quota.Limit {
	burst := r.Limit.Burst
	if burst <= 0 {
		burst = r.Limit.Rate
	}
	return quota.Limit{Rate: float64(r.Limit.Rate) / r.Limit.Period.Seconds(), Burst: burst, Period: r.Limit.Period}
}

// action is a quota assignment of strategy to the bucket id, for the configured TTL.
func (s *Service) action(id *rlqsv3.BucketId, strategy *typev3.RateLimitStrategy) *rlqsv3.RateLimitQuotaResponse_BucketAction {
	return &rlqsv3.RateLimitQuotaResponse_BucketAction{BucketId: id,
		BucketAction: &rlqsv3.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction_{
			QuotaAssignmentAction: &rlqsv3.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction{
				AssignmentTimeToLive: durationpb.New(s.cfg.AssignmentTTL), RateLimitStrategy: strategy,
			}}}
}

// send sends as to st in one message, unless st's call has ended; an error ends the call,
// which its Recv then returns.
func (st *stream) send(as []*rlqsv3.RateLimitQuotaResponse_BucketAction) {
	st.sendMu.Lock()
	defer st.sendMu.Unlock()
	if st.done {
		return
	}
	_ = st.srv.Send(&rlqsv3.RateLimitQuotaResponse{BucketAction: as})
}

// Swap puts rules in force: a bucket whose rule is gone is abandoned (each Envoy erases it and,
// should a request match it again, subscribes anew, then to no rule: ALLOW_ALL); the others take
// their new rule at the next interval. Safe for concurrent use.
func (s *Service) Swap(rules *rls.Rules) {
	abandon := map[*stream][]*rlqsv3.RateLimitQuotaResponse_BucketAction{}
	s.mu.Lock()
	s.rules = rules
	for _, b := range s.buckets {
		q, ok := rules.MatchBucket(b.domain, b.id.GetBucket())
		if ok || !b.matched {
			b.rule, b.matched = q, ok
			continue
		}
		b.rule, b.matched = rls.QuotaRule{}, false
		for st := range b.meters {
			delete(st.watched, b.key)
			delete(st.expires, b.key)
			b.gone = append(b.gone, st.id)
			abandon[st] = append(abandon[st], &rlqsv3.RateLimitQuotaResponse_BucketAction{BucketId: b.id,
				BucketAction: &rlqsv3.RateLimitQuotaResponse_BucketAction_AbandonAction_{
					AbandonAction: &rlqsv3.RateLimitQuotaResponse_BucketAction_AbandonAction{}}})
		}
		clear(b.meters)
		clear(b.shares)
	}
	s.mu.Unlock()
	for st, as := range abandon {
		st.send(as)
	}
}
