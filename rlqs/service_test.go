package rlqs

import (
	"context"
	"testing"
	"time"

	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"

	"github.com/rl-exporter/rl-exporter/internal/eventually"
)

var (
	chat   = map[string]string{"name": "chat"}
	banned = map[string]string{"name": "banned"}
	free   = map[string]string{"name": "free"}
	other  = map[string]string{"name": "other"}
)

func TestFirstReportIsAnsweredAtOnce(t *testing.T) {
	rules, _ := loadRules(t, chatRules)
	// An interval longer than the test: only the answer to the subscription can come.
	srv := startServer(t, Config{Interval: time.Hour}, rules)
	c := client(t, time.Hour, srv.addr)
	if !c.Request(chat) {
		t.Fatal("the first request, before any assignment, was denied")
	}
	eventually.True(t, 2*time.Second, "a token bucket for the first report", func() bool { return bucketRate(c, chat) > 0 })
	s, _ := c.Assignment(chat)
	tb := s.GetTokenBucket()
	if tb.GetMaxTokens() != 100 || tb.GetTokensPerFill().GetValue() != 1000 || tb.GetFillInterval().AsDuration() != 10*time.Second {
		t.Errorf("a lone Envoy's bucket: %v, want 100 tokens at most, 1000 per 10s", tb)
	}
}

func TestBlockedUnlimitedAndUnmatchedBuckets(t *testing.T) {
	rules, _ := loadRules(t, chatRules)
	srv := startServer(t, Config{Interval: time.Hour}, rules)
	c := client(t, time.Hour, srv.addr)
	want := []struct {
		bucket map[string]string
		rule   typev3.RateLimitStrategy_BlanketRule
	}{{banned, typev3.RateLimitStrategy_DENY_ALL}, {free, typev3.RateLimitStrategy_ALLOW_ALL}, {other, typev3.RateLimitStrategy_ALLOW_ALL}}
	for _, w := range want {
		c.Request(w.bucket)
		eventually.True(t, 2*time.Second, w.bucket["name"]+" "+w.rule.String(), func() bool {
			r, ok := blanket(c, w.bucket)
			return ok && r == w.rule
		})
	}
	if c.Request(banned) {
		t.Error("a request of a blocked bucket was allowed under DENY_ALL")
	}
}

func TestRemovedRuleAbandonsItsBuckets(t *testing.T) {
	rules, _ := loadRules(t, chatRules)
	srv := startServer(t, Config{Interval: time.Hour}, rules)
	c := client(t, time.Hour, srv.addr)
	c.Request(chat)
	eventually.True(t, 2*time.Second, "a token bucket", func() bool { return bucketRate(c, chat) > 0 })
	fewer, _ := loadRules(t, "domain: chat\ndescriptors:\n  - key: name\n    value: free\n    rate_limit: {unlimited: true}\n")
	srv.svc.Swap(fewer)
	eventually.True(t, 2*time.Second, "the bucket erased by the abandon action", func() bool {
		_, cached := c.Assignment(chat)
		return !cached
	})
	// A request matched again subscribes anew, to no rule now.
	c.Request(chat)
	eventually.True(t, 2*time.Second, "ALLOW_ALL for a bucket of no rule", func() bool {
		r, ok := blanket(c, chat)
		return ok && r == typev3.RateLimitStrategy_ALLOW_ALL
	})
}

func TestUnrenewedAssignmentsAreCounted(t *testing.T) {
	rules, _ := loadRules(t, chatRules)
	store := &switchStore{}
	srv := startServer(t, Config{Interval: 100 * time.Millisecond, AssignmentTTL: time.Second, Store: store}, rules)
	c := client(t, time.Hour, srv.addr)
	c.Request(chat)
	eventually.True(t, 2*time.Second, "a token bucket", func() bool { return bucketRate(c, chat) > 0 })
	store.fail.Store(true)
	eventually.True(t, 3*time.Second, "an expiry counted", func() bool { return srv.svc.Stats().Expired["chat.name_chat"] > 0 })
	if srv.svc.Stats().StoreErrors == 0 {
		t.Error("store errors not counted")
	}
	eventually.True(t, 3*time.Second, "the filter's assignment expired", func() bool {
		s, _ := c.Assignment(chat)
		return s == nil
	})
}

func TestStatsShowStreamsDemandAndShares(t *testing.T) {
	rules, _ := loadRules(t, chatRules)
	srv := startServer(t, Config{Interval: 200 * time.Millisecond}, rules)
	a, b := client(t, 200*time.Millisecond, srv.addr), client(t, 200*time.Millisecond, srv.addr)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a.Offer(ctx, chat, 40)
	b.Offer(ctx, chat, 40)
	eventually.True(t, 5*time.Second, "2 streams, demand and shares of chat.name_chat", func() bool {
		st := srv.svc.Stats()
		r := st.Rules["chat.name_chat"]
		return st.Streams == 2 && r.Buckets == 1 && r.Demand > 60 && r.Assigned > 95 && r.Assigned <= 100
	})
}

func TestDomainIsRequired(t *testing.T) {
	rules, _ := loadRules(t, chatRules)
	srv := startServer(t, Config{}, rules)
	c := filtersimNoDomain(t, srv.addr)
	c.Request(chat)
	eventually.True(t, 2*time.Second, "the stream refused", func() bool { return c.Streams() == 1 })
	if s, _ := c.Assignment(chat); s != nil {
		t.Errorf("an assignment on a stream without domain: %v", s)
	}
}
