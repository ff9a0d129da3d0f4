package tracing

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
)

var _ redisstore.BatchTracer = (*Provider)(nil)

// Concurrent decisions on a real Redis travel in batches: every decision
// span is either the parent of a Redis span or linked to a batch span
// that links back to it and is the parent of the batch's Redis spans.
func TestBatchedDecisionsKeepTheirTraceContext(t *testing.T) {
	srv := redistest.Single(t)
	spans := tracetest.NewInMemoryExporter()
	p := NewWithSDK(sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans)))
	defer p.Shutdown(context.Background())

	// Built as serve builds it (RESP2; a default go-redis client races
	// with itself negotiating RESP3 maintenance notifications).
	rdb, err := redisstore.ClientConfig{URL: srv.URL()}.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	if err := p.InstrumentRedis(rdb); err != nil {
		t.Fatal(err)
	}
	store, err := redisstore.New(rdb, redisstore.Config{BatchTracer: p})
	if err != nil {
		t.Fatal(err)
	}
	// A deadline no loaded machine misses: this test is not about time.
	lim, err := limiter.New(limiter.Config{Limit: limiter.PerSecond(limiter.GCRA, 1_000_000), Store: store, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	const callers, each = 32, 20
	var wg sync.WaitGroup
	for g := 0; g < callers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				ctx, span := p.StartDecision(context.Background(), "/v1/search", "free", limiter.GCRA)
				d, err := lim.Allow(ctx, "batch-trace:"+strconv.Itoa(g))
				EndDecision(span, limiter.StatusAllowed, d, err)
				if err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()

	all := spans.GetSpans()
	byID := map[trace.SpanID]tracetest.SpanStub{}
	hasChild := map[trace.SpanID]bool{}
	for _, s := range all {
		byID[s.SpanContext.SpanID()] = s
		hasChild[s.Parent.SpanID()] = true
	}
	decisions, viaBatch := 0, 0
	for _, s := range all {
		switch s.Name {
		case DecisionSpanName:
			decisions++
			if hasChild[s.SpanContext.SpanID()] {
				continue
			}
			found := false
			for _, l := range s.Links {
				b, ok := byID[l.SpanContext.SpanID()]
				if !ok || b.Name != BatchSpanName {
					continue
				}
				for _, back := range b.Links {
					if back.SpanContext.SpanID() == s.SpanContext.SpanID() {
						found = true
					}
				}
				if !hasChild[b.SpanContext.SpanID()] {
					t.Errorf("batch span %s has no Redis span under it", b.SpanContext.SpanID())
				}
			}
			if !found {
				t.Errorf("decision span %s: no Redis span under it and no batch span linked both ways", s.SpanContext.SpanID())
			} else {
				viaBatch++
			}
		}
	}
	if decisions != callers*each {
		t.Fatalf("%d decision spans, want %d", decisions, callers*each)
	}
	if viaBatch == 0 {
		t.Errorf("no decision went through a batch span: none shared a batch, or the batch lost their trace")
	}
	t.Logf("%d decisions, %d of them linked to a batch span", decisions, viaBatch)
}
