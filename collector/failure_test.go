package collector_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rl-exporter/rl-exporter/collector"
	"github.com/rl-exporter/rl-exporter/limiter"
)

func TestDegradedAndCancelledDecisionsAndTheCircuitAreCountedApart(t *testing.T) {
	c, err := collector.New(collector.Config{Endpoints: []string{"/a"}, Tiers: []string{"free"}, DefaultTier: "free", Store: "redis"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	lim := limiter.PerMinute(limiter.GCRA, 10)
	storeDown := fmt.Errorf("redis store: %w", limiter.ErrCircuitOpen)
	// Two degraded decisions (one admitted, one refused), three cancelled
	// callers, one plain admission.
	c.RecordDecision(ctx, limiter.Record{Endpoint: "/a", PlanTier: "free", Limit: lim, Status: limiter.StatusAllowed,
		Decision: limiter.Decision{Allowed: true, Limit: 5, Remaining: 4, Failure: limiter.FailureLocal}, Err: storeDown})
	c.RecordDecision(ctx, limiter.Record{Endpoint: "/a", PlanTier: "free", Key: "k", Limit: lim, Status: limiter.StatusRejected,
		Decision: limiter.Decision{Limit: 5, Failure: limiter.FailureLocal}, Err: storeDown})
	for i := 0; i < 3; i++ {
		c.RecordDecision(ctx, limiter.Record{Endpoint: "/a", PlanTier: "free", Limit: lim, Status: limiter.StatusCanceled,
			Decision: limiter.Decision{Failure: limiter.FailureCanceled}, Err: context.Canceled})
	}
	c.RecordDecision(ctx, limiter.Record{Endpoint: "/a", PlanTier: "free", Limit: lim, Status: limiter.StatusAllowed,
		Decision: limiter.Decision{Allowed: true, Limit: 10, Remaining: 9}})
	c.CircuitChanged("redis", limiter.CircuitClosed, limiter.CircuitOpen)

	const want = `
# HELP rate_limit_canceled_total Requests whose caller cancelled or went away while the store decided; not store failures, not in rate_limit_requests_total.
# TYPE rate_limit_canceled_total counter
rate_limit_canceled_total{endpoint="/a"} 3
rate_limit_canceled_total{endpoint="other"} 0
# HELP rate_limit_circuit_state State of the circuit breaker in front of the store: 0 closed, 1 half-open, 2 open.
# TYPE rate_limit_circuit_state gauge
rate_limit_circuit_state{store="redis"} 2
# HELP rate_limit_degraded_total Decisions made on this instance's share of the limit because the store failed (fail_policy local); they are also counted in rate_limit_requests_total as allowed or rejected.
# TYPE rate_limit_degraded_total counter
rate_limit_degraded_total{endpoint="/a"} 2
rate_limit_degraded_total{endpoint="other"} 0
# HELP rate_limit_fail_open_total Requests let through because the store failed, by reason.
# TYPE rate_limit_fail_open_total counter
rate_limit_fail_open_total{endpoint="/a",reason="circuit_open"} 0
rate_limit_fail_open_total{endpoint="/a",reason="error"} 0
rate_limit_fail_open_total{endpoint="/a",reason="timeout"} 0
rate_limit_fail_open_total{endpoint="other",reason="circuit_open"} 0
rate_limit_fail_open_total{endpoint="other",reason="error"} 0
rate_limit_fail_open_total{endpoint="other",reason="timeout"} 0
# HELP rate_limit_requests_total Rate-limit decisions, exactly one per request, by outcome (allowed, rejected, shadow_rejected, fail_open, fail_closed, penalized).
# TYPE rate_limit_requests_total counter
rate_limit_requests_total{endpoint="/a",plan_tier="free",status="allowed"} 2
rate_limit_requests_total{endpoint="/a",plan_tier="free",status="fail_closed"} 0
rate_limit_requests_total{endpoint="/a",plan_tier="free",status="fail_open"} 0
rate_limit_requests_total{endpoint="/a",plan_tier="free",status="penalized"} 0
rate_limit_requests_total{endpoint="/a",plan_tier="free",status="rejected"} 1
rate_limit_requests_total{endpoint="/a",plan_tier="free",status="shadow_rejected"} 0
rate_limit_requests_total{endpoint="other",plan_tier="free",status="allowed"} 0
rate_limit_requests_total{endpoint="other",plan_tier="free",status="fail_closed"} 0
rate_limit_requests_total{endpoint="other",plan_tier="free",status="fail_open"} 0
rate_limit_requests_total{endpoint="other",plan_tier="free",status="penalized"} 0
rate_limit_requests_total{endpoint="other",plan_tier="free",status="rejected"} 0
rate_limit_requests_total{endpoint="other",plan_tier="free",status="shadow_rejected"} 0
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "rate_limit_canceled_total", "rate_limit_circuit_state",
		"rate_limit_degraded_total", "rate_limit_fail_open_total", "rate_limit_requests_total"); err != nil {
		t.Fatal(err)
	}
	if problems, err := testutil.CollectAndLint(c, "rate_limit_canceled_total", "rate_limit_circuit_state", "rate_limit_degraded_total"); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", problems, err)
	}
}

// lockedLog is a log destination safe for concurrent writes.
type lockedLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestAScraperThatHangsUpMidResponseLogsNoError(t *testing.T) {
	reg := prometheus.NewRegistry()
	// Enough series that the response outgrows the socket buffers.
	big := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "big_series", Help: "Many series."}, []string{"n"})
	for i := 0; i < 60000; i++ {
		big.WithLabelValues(fmt.Sprintf("series-number-%06d-with-a-long-label-value", i)).Set(float64(i))
	}
	reg.MustRegister(big)
	var logs lockedLog
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	done := make(chan struct{}, 4)
	h := collector.HandlerFor(reg, logger)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		done <- struct{}{}
	}), ReadHeaderTimeout: time.Second}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Fprintf(conn, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(conn).Peek(64); err != nil {
		t.Fatal(err)
	}
	// Hang up with unread data: the kernel resets the connection.
	_ = conn.(*net.TCPConn).SetLinger(0)
	_ = conn.Close()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the handler did not finish after the scraper hung up")
	}
	out := logs.String()
	if strings.Contains(out, "level=ERROR") {
		t.Errorf("a scraper hanging up logged errors:\n%.2000s", out)
	}
	if !strings.Contains(out, "level=DEBUG") {
		t.Errorf("the write error was not logged at debug level at all; log:\n%.2000s", out)
	}
}

func TestOnAStoreOfSeveralNodesOnlyEachNodesCircuitIsExported(t *testing.T) {
	c, err := collector.New(collector.Config{Endpoints: []string{"/a"}, Tiers: []string{"free"}, DefaultTier: "free", Store: "redis"})
	if err != nil {
		t.Fatal(err)
	}
	series := func() string {
		rec := httptest.NewRecorder()
		c.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		var out []string
		for _, line := range strings.Split(rec.Body.String(), "\n") {
			if strings.HasPrefix(line, "rate_limit_circuit_state{") {
				out = append(out, line)
			}
		}
		return strings.Join(out, "\n")
	}
	if got, want := series(), `rate_limit_circuit_state{store="redis"} 0`; got != want {
		t.Fatalf("before any node's breaker: %q, want %q", got, want)
	}
	// A Cluster's masters each get a breaker; the store's own is never
	// consulted for a keyed decision, so its series would say "closed"
	// while a master's circuit is open.
	c.CircuitAdded("redis/10.0.0.1:7000", limiter.CircuitClosed)
	c.CircuitAdded("redis/10.0.0.2:7000", limiter.CircuitClosed)
	c.CircuitChanged("redis/10.0.0.2:7000", limiter.CircuitClosed, limiter.CircuitOpen)
	c.CircuitChanged("redis", limiter.CircuitClosed, limiter.CircuitClosed)
	want := `rate_limit_circuit_state{store="redis/10.0.0.1:7000"} 0
rate_limit_circuit_state{store="redis/10.0.0.2:7000"} 2`
	if got := series(); got != want {
		t.Errorf("with two nodes' breakers:\n%s\nwant\n%s", got, want)
	}
}

// A Sentinel failover's unconfirmed decisions are counted for the store,
// and the series is there at 0 before any.
func TestFailoverUnconfirmedDecisionsAreCounted(t *testing.T) {
	c, err := collector.New(collector.Config{Endpoints: []string{"/a"}, Tiers: []string{"free"}, DefaultTier: "free", Store: "redis"})
	if err != nil {
		t.Fatal(err)
	}
	const head = `
# HELP rate_limit_failover_unconfirmed_total Decisions whose Redis write was on its way to a Sentinel-managed primary when a Sentinel began promoting its replica: answered, but possibly missing on the promoted primary.
# TYPE rate_limit_failover_unconfirmed_total counter
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(head+"rate_limit_failover_unconfirmed_total{store=\"redis\"} 0\n"), "rate_limit_failover_unconfirmed_total"); err != nil {
		t.Error(err)
	}
	c.ObserveFailoverUnconfirmed(3)
	c.ObserveFailoverUnconfirmed(0)
	c.ObserveFailoverUnconfirmed(2)
	if err := testutil.CollectAndCompare(c, strings.NewReader(head+"rate_limit_failover_unconfirmed_total{store=\"redis\"} 5\n"), "rate_limit_failover_unconfirmed_total"); err != nil {
		t.Error(err)
	}
}
