package rlqs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rl-exporter/rl-exporter/decision"
	"github.com/rl-exporter/rl-exporter/quota"
	"github.com/rl-exporter/rl-exporter/rls"
)

// ServiceName is the gRPC name of Envoy's Rate Limit Quota Service, as the health service reports it.
const ServiceName = "envoy.service.rate_limit_quota.v3.RateLimitQuotaService"

// Defaults of Config.
const (
	// DefaultInterval: shares are divided again, and every assignment renewed, each second, so
	// that demand that shifts or a stream that ends moves the shares within two intervals.
	DefaultInterval = time.Second
	// DefaultAssignmentTTL outlives four missed renewals; an Envoy keeps its share that long
	// when this server is gone, then falls back to its expired_assignment_behavior.
	DefaultAssignmentTTL = 5 * time.Second
	// DefaultIdle is past three of Envoy's 5 s reports: a bucket a stream stopped reporting
	// for that long counts as idle.
	DefaultIdle = 16 * time.Second
	// DefaultMaxBuckets bounds the buckets one stream may watch, and so the memory it holds.
	DefaultMaxBuckets = 10000
	// DefaultMaxBucketEntries bounds a BucketId's key/value pairs, as rls.max_entries a descriptor's.
	DefaultMaxBucketEntries = 16
)

// Config configures a Service; zero fields take the defaults.
type Config struct {
	Store            quota.Store   // default a quota.MemoryStore: one replica
	Interval         time.Duration // how often shares are divided and assignments renewed
	AssignmentTTL    time.Duration // assignment_time_to_live; whole seconds, at least 1 s
	Idle             time.Duration // a bucket not reported on a stream for this long counts as idle
	Quota            quota.Config
	MaxBuckets       int // per stream
	MaxBucketEntries int // per BucketId
	Logger           *slog.Logger
	Now              func() time.Time
}

func (c Config) withDefaults() Config {
	if c.Store == nil {
		c.Store = &quota.MemoryStore{}
	}
	if c.Interval <= 0 {
		c.Interval = DefaultInterval
	}
	if c.AssignmentTTL <= 0 {
		c.AssignmentTTL = DefaultAssignmentTTL
	}
	// Envoy reads the TTL's seconds alone: 1.5 s would be 1 s there, 0.5 s an instant expiry.
	c.AssignmentTTL = max(c.AssignmentTTL.Truncate(time.Second), time.Second)
	if c.Idle <= 0 {
		c.Idle = DefaultIdle
	}
	if c.MaxBuckets <= 0 {
		c.MaxBuckets = DefaultMaxBuckets
	}
	if c.MaxBucketEntries <= 0 {
		c.MaxBucketEntries = DefaultMaxBucketEntries
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Service implements envoy.service.rate_limit_quota.v3.RateLimitQuotaService. It is safe for
// concurrent use; Run divides the shares and must run for assignments past the first.
type Service struct {
	rlqsv3.UnimplementedRateLimitQuotaServiceServer
	cfg     Config
	replica string // names this replica's streams in the store
	nextID  atomic.Uint64

	handlers sync.WaitGroup // StreamRateLimitQuotas calls under way; Add under mu while !draining

	mu        sync.Mutex
	draining  bool          // Drain was called: no new stream
	quit      chan struct{} // closed by Drain: every stream ends
	rules     *rls.Rules
	streams   map[*stream]bool
	buckets   map[string]*bucket // by domain and bucket key
	expired   map[string]uint64  // assignments that ran out unrenewed, by rule path
	storeErrs uint64
}

// New returns a Service matching buckets to rules (nil: none; every bucket is then allowed).
func New(cfg Config, rules *rls.Rules) (*Service, error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("rlqs: replica id: %w", err)
	}
	if rules == nil {
		rules = &rls.Rules{}
	}
	return &Service{cfg: cfg.withDefaults(), replica: hex.EncodeToString(b[:]), rules: rules,
		streams: map[*stream]bool{}, buckets: map[string]*bucket{}, expired: map[string]uint64{}, quit: make(chan struct{})}, nil
}

// stream is one Envoy's StreamRateLimitQuotas call.
type stream struct {
	id      string
	srv     grpc.BidiStreamingServer[rlqsv3.RateLimitQuotaUsageReports, rlqsv3.RateLimitQuotaResponse]
	sendMu  sync.Mutex
	done    bool                 // under sendMu: the call has ended, nothing more is sent
	domain  string               // under Service.mu, as below
	watched map[string]*bucket   // by key
	expires map[string]time.Time // when each bucket's last assignment runs out
}

// bucket is one BucketId of one domain, and the streams watching it on this replica.
type bucket struct {
	key     string // the store key
	domain  string
	id      *rlqsv3.BucketId
	rule    rls.QuotaRule
	matched bool
	meters  map[*stream]*quota.Meter
	shares  map[*stream]float64 // the rate last assigned to each stream
	gone    []string            // clients of this replica gone since the last exchange
}

// StreamRateLimitQuotas serves one Envoy: each report's buckets are watched from their first
// report on, answered at once, then renewed by Run every interval until the stream ends or
// Drain ends it.
func (s *Service) StreamRateLimitQuotas(srv grpc.BidiStreamingServer[rlqsv3.RateLimitQuotaUsageReports, rlqsv3.RateLimitQuotaResponse]) error {
	st := &stream{id: fmt.Sprintf("%s/%d", s.replica, s.nextID.Add(1)), srv: srv,
		watched: map[string]*bucket{}, expires: map[string]time.Time{}}
	s.mu.Lock()
	if s.draining {
		s.mu.Unlock()
		return errDraining
	}
	s.handlers.Add(1)
	s.streams[st] = true
	s.mu.Unlock()
	defer s.handlers.Done()
	defer s.close(st)
	// Recv runs on its own goroutine so that Drain can end the call while Recv waits; it
	// returns once the call has ended, when gRPC cancels the stream.
	type received struct {
		msg *rlqsv3.RateLimitQuotaUsageReports
		err error
	}
	msgs, ended := make(chan received), make(chan struct{})
	defer close(ended)
	go func() {
		for {
			msg, err := srv.Recv()
			select {
			case msgs <- received{msg, err}:
			case <-ended:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	for {
		var r received
		select {
		case <-s.quit:
			return errDraining
		case r = <-msgs:
		}
		if errors.Is(r.err, io.EOF) {
			return nil
		}
		if r.err != nil {
			return r.err
		}
		fresh, err := s.report(st, r.msg)
		if err != nil {
			return err
		}
		if len(fresh) > 0 {
			s.assign(srv.Context(), fresh)
		}
	}
}

// errDraining ends a stream of a replica that is stopping: Envoy's filter restarts it, at its
// next report, on the next host of its cluster.
var errDraining = status.Error(codes.Unavailable, "rlqs: this server is stopping; reconnect to another")

// Drain ends every stream and refuses new ones (UNAVAILABLE), so that each Envoy moves to
// another replica at its next report instead of holding this one's graceful stop for the whole
// drain, then exchanges once more to tell the store its streams are gone: the other replicas
// divide the limit among their own streams at their next interval rather than after this
// one's entries go stale (three intervals). The assignments already sent hold until their TTL.
// It returns ctx's error if the streams or the store outlast ctx. Safe for concurrent use;
// calling it again only waits again.
func (s *Service) Drain(ctx context.Context) error {
	s.mu.Lock()
	if !s.draining {
		s.draining = true
		close(s.quit)
	}
	s.mu.Unlock()
	ended := make(chan struct{})
	go func() {
		s.handlers.Wait()
		close(ended)
	}()
	select {
	case <-ended:
	case <-ctx.Done():
		return fmt.Errorf("rlqs: drain: streams still open: %w", ctx.Err())
	}
	s.Tick(ctx)
	return ctx.Err()
}

// close forgets st: its buckets' shares go back to the other streams at the next interval.
func (s *Service) close(st *stream) {
	st.sendMu.Lock()
	st.done = true
	st.sendMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.streams, st)
	for _, b := range st.watched {
		delete(b.meters, st)
		delete(b.shares, st)
		b.gone = append(b.gone, st.id)
	}
}

// report records msg's usage on st and returns the buckets st watches from this report on.
func (s *Service) report(st *stream, msg *rlqsv3.RateLimitQuotaUsageReports) ([]*bucket, error) {
	now := s.cfg.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	switch d := msg.GetDomain(); {
	case st.domain == "" && d == "":
		return nil, status.Error(codes.InvalidArgument, "domain: required in a stream's first report")
	case st.domain == "":
		if len(d) > decision.MaxKey {
			return nil, status.Errorf(codes.InvalidArgument, "domain: longer than %d bytes", decision.MaxKey)
		}
		st.domain = d
	case d != "" && d != st.domain:
		return nil, status.Errorf(codes.InvalidArgument, "domain: %q on a stream of %q; open a stream per domain", d, st.domain)
	}
	var fresh []*bucket
	for i, u := range msg.GetBucketQuotaUsages() {
		key, err := s.bucketKey(st.domain, u.GetBucketId())
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "bucket_quota_usages[%d].bucket_id: %v", i, err)
		}
		b := st.watched[key]
		if b == nil {
			if len(st.watched) >= s.cfg.MaxBuckets {
				return nil, status.Errorf(codes.ResourceExhausted, "more than %d buckets on one stream", s.cfg.MaxBuckets)
			}
			b = s.watch(st, key, u.GetBucketId())
			fresh = append(fresh, b)
		}
		b.meters[st].Report(u.GetNumRequestsAllowed()+u.GetNumRequestsDenied(), now)
	}
	return fresh, nil
}

// watch subscribes st to the bucket of key; call with s.mu held.
func (s *Service) watch(st *stream, key string, id *rlqsv3.BucketId) *bucket {
	b := s.buckets[key]
	if b == nil {
		b = &bucket{key: key, domain: st.domain, id: id, meters: map[*stream]*quota.Meter{}, shares: map[*stream]float64{}}
		b.rule, b.matched = s.rules.MatchBucket(st.domain, id.GetBucket())
		s.buckets[key] = b
	}
	b.meters[st] = &quota.Meter{MinSpan: s.cfg.Interval / 4}
	st.watched[key] = b
	return b
}

// bucketKey is the store key of a BucketId of domain: its pairs sorted by key, each part escaped.
func (s *Service) bucketKey(domain string, id *rlqsv3.BucketId) (string, error) {
	kv := id.GetBucket()
	switch {
	case len(kv) == 0:
		return "", errors.New("no key/value pair")
	case len(kv) > s.cfg.MaxBucketEntries:
		return "", fmt.Errorf("%d key/value pairs, more than %d", len(kv), s.cfg.MaxBucketEntries)
	}
	keys := make([]string, 0, len(kv))
	size := len(domain)
	for k, v := range kv {
		keys = append(keys, k)
		size += len(k) + len(v) + 2
	}
	if size > 4*decision.MaxKey {
		return "", fmt.Errorf("%d bytes, more than %d", size, 4*decision.MaxKey)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("rlqs|")
	b.WriteString(escape(domain))
	for _, k := range keys {
		b.WriteString("|" + escape(k) + "=" + escape(kv[k]))
	}
	return b.String(), nil
}

var escaper = strings.NewReplacer("%", "%25", "|", "%7C", "=", "%3D")

func escape(s string) string { return escaper.Replace(s) }
