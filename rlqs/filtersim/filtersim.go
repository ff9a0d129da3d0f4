// Package filtersim is a client of the Rate Limit Quota Service that behaves as Envoy's
// rate_limit_quota filter does (source/extensions/filters/http/rate_limit_quota in Envoy,
// docs/envoy.md "Quota shares"), for tests: bucket matching is left to the caller, who names a
// request's bucket. The first request of a bucket is decided by the no-assignment behaviour and
// reported at once (the subscription); every bucket is reported on one timer, its counts reset;
// a broken stream is restarted at that timer, without a new first report; an assignment's TTL and
// a token bucket's fill interval are read in whole seconds; a token bucket whose settings are
// unchanged is kept, a changed one starts with the old one's share of tokens; on expiry the
// bucket falls back to the expired-assignment behaviour, else to the no-assignment one; an abandon
// erases the bucket; requests_per_time_unit is ignored. The stream goes to the first of Addrs
// that answers, the next ones when it fails, as Envoy's cluster would.
package filtersim

import (
	"context"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Config configures a Client.
type Config struct {
	Addrs          []string      // the RLQS servers, tried in turn
	Domain         string        // sent with every report
	ReportInterval time.Duration // Envoy's is 5 s whatever reporting_interval says; default 5 s
	// NoAssignment is the strategy of a bucket without an assignment; nil: ALLOW_ALL.
	NoAssignment *typev3.RateLimitStrategy
	// ExpiredFallback, when set, replaces an expired assignment for ExpiredTTL, after which the
	// bucket falls back to NoAssignment.
	ExpiredFallback *typev3.RateLimitStrategy
	ExpiredTTL      time.Duration
}

// Client is one Envoy's filter. It is safe for concurrent use.
type Client struct {
	cfg    Config
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	buckets map[string]*bucketState
	totals  map[string]*[2]uint64 // allowed and denied since Start, by bucket key
	stream  grpc.BidiStreamingClient[rlqsv3.RateLimitQuotaUsageReports, rlqsv3.RateLimitQuotaResponse]
	conns   []*grpc.ClientConn
	next    int // the address tried first on a restart
	streams int // streams opened
}

// bucketState is the filter's cached bucket.
type bucketState struct {
	id             *rlqsv3.BucketId
	allowed        uint64
	denied         uint64
	action         *typev3.RateLimitStrategy // nil: the no-assignment behaviour
	tb             *tokenBucket
	expires        time.Time // of action; zero: none
	assigned       time.Time // when the last assignment arrived; zero: none yet
	fallbackExpiry time.Time // of the expired-assignment fallback in force
	inFallback     bool
}

// Start starts a client; it opens its stream with its first bucket, as Envoy does.
func Start(cfg Config) *Client {
	if cfg.ReportInterval <= 0 {
		cfg.ReportInterval = 5 * time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Client{cfg: cfg, ctx: ctx, cancel: cancel, buckets: map[string]*bucketState{}, totals: map[string]*[2]uint64{}}
	for _, a := range cfg.Addrs {
		conn, err := grpc.NewClient(a, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err == nil {
			c.conns = append(c.conns, conn)
		}
	}
	c.wg.Go(c.reportLoop)
	return c
}

// Close ends the client's stream and stops it, as an Envoy that goes away.
func (c *Client) Close() {
	c.cancel()
	c.wg.Wait()
	for _, conn := range c.conns {
		_ = conn.Close()
	}
}

// Streams returns how many streams the client has opened.
func (c *Client) Streams() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.streams
}

// Key is a bucket's canonical name: its pairs sorted, k=v joined by commas.
func Key(bucket map[string]string) string {
	ks := make([]string, 0, len(bucket))
	for k, v := range bucket {
		ks = append(ks, k+"="+v)
	}
	sort.Strings(ks)
	return strings.Join(ks, ",")
}

// Request decides one request of bucket as the filter does and reports whether it is allowed.
func (c *Client) Request(bucket map[string]string) bool {
	key := Key(bucket)
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.buckets[key]
	if b == nil {
		ok := c.cfg.NoAssignment.GetBlanketRule() != typev3.RateLimitStrategy_DENY_ALL
		b = &bucketState{id: &rlqsv3.BucketId{Bucket: bucket}}
		c.buckets[key] = b
		c.count(key, b, ok)
		c.ensureStream()
		c.sendLocked([]*bucketState{b}, now)
		return ok
	}
	c.expire(b, now)
	ok := c.allows(b, now)
	c.count(key, b, ok)
	return ok
}

func (c *Client) count(key string, b *bucketState, ok bool) {
	t := c.totals[key]
	if t == nil {
		t = &[2]uint64{}
		c.totals[key] = t
	}
	if ok {
		b.allowed++
		t[0]++
	} else {
		b.denied++
		t[1]++
	}
}

// allows applies b's strategy: its assignment, else the no-assignment behaviour.
func (c *Client) allows(b *bucketState, now time.Time) bool {
	s := b.action
	if s == nil {
		s = c.cfg.NoAssignment
	}
	switch {
	case s.GetTokenBucket() != nil:
		return b.tb == nil || b.tb.take(now)
	case isBlanket(s):
		return s.GetBlanketRule() == typev3.RateLimitStrategy_ALLOW_ALL
	default:
		// No strategy, or requests_per_time_unit, which the filter logs as unsupported: allowed.
		return true
	}
}

// expire moves b past an assignment or fallback that has run out.
func (c *Client) expire(b *bucketState, now time.Time) {
	if b.inFallback && !b.fallbackExpiry.After(now) {
		b.action, b.tb, b.inFallback = nil, nil, false
		return
	}
	if b.action == nil || b.inFallback || b.expires.IsZero() || b.expires.After(now) {
		return
	}
	if c.cfg.ExpiredFallback == nil {
		b.action, b.tb = nil, nil
		return
	}
	c.apply(b, c.cfg.ExpiredFallback, now)
	b.inFallback, b.fallbackExpiry = true, now.Add(c.cfg.ExpiredTTL)
}

// Totals returns the requests of bucket allowed and denied since Start.
func (c *Client) Totals(bucket map[string]string) (allowed, denied uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t := c.totals[Key(bucket)]; t != nil {
		return t[0], t[1]
	}
	return 0, 0
}

// Assignment returns the strategy in force on bucket (nil: none) and whether the bucket is cached.
func (c *Client) Assignment(bucket map[string]string) (*typev3.RateLimitStrategy, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.buckets[Key(bucket)]
	if b == nil {
		return nil, false
	}
	c.expire(b, time.Now())
	return b.action, true
}

// AssignedAt returns when the last quota assignment of bucket arrived (zero: none since the
// bucket was cached), so that a test sees a renewal or a new server's first assignment even
// when its strategy is the same.
func (c *Client) AssignedAt(bucket map[string]string) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if b := c.buckets[Key(bucket)]; b != nil {
		return b.assigned
	}
	return time.Time{}
}

// Offer sends rate requests per second of bucket, evenly spread, until ctx is done or the client
// is closed.
func (c *Client) Offer(ctx context.Context, bucket map[string]string, rate float64) {
	c.wg.Go(func() {
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		start, sent := time.Now(), 0.0
		for {
			select {
			case <-ctx.Done():
				return
			case <-c.ctx.Done():
				return
			case now := <-t.C:
				for due := math.Floor(rate * now.Sub(start).Seconds()); sent < due; sent++ {
					c.Request(bucket)
				}
			}
		}
	})
}

// seconds is a duration as Envoy reads it: whole seconds.
func seconds(d *durationpb.Duration) time.Duration {
	return time.Duration(d.GetSeconds()) * time.Second
}

func isBlanket(s *typev3.RateLimitStrategy) bool {
	_, ok := s.GetStrategy().(*typev3.RateLimitStrategy_BlanketRule_)
	return ok
}
