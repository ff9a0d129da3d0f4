package tracing

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/rl-exporter/rl-exporter/collector"
	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
)

// A decision on a real Redis: the Redis round trip is a child span of the
// decision span, no span records the client's key, and the latency
// histogram's exemplar links to the decision's trace.
func TestRedisRoundTripsAreChildrenOfTheDecisionSpan(t *testing.T) {
	srv := redistest.Single(t)
	spans := tracetest.NewInMemoryExporter()
	p := NewWithSDK(sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans)))
	defer p.Shutdown(context.Background())

	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	if err := p.InstrumentRedis(rdb); err != nil {
		t.Fatal(err)
	}
	store, err := redisstore.New(rdb, redisstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	col, err := collector.New(collector.Config{Endpoints: []string{"/v1/search"}, Store: store.Name(), Exemplars: p.Enabled()})
	if err != nil {
		t.Fatal(err)
	}
	// Patient: the first call loads the script, past the default 100 ms on a loaded machine, and
	// this test is about spans, not deadlines.
	lim, err := limiter.New(limiter.Config{Limit: limiter.PerSecond(limiter.GCRA, 10), Store: store, Observer: col, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}

	const key = "secret-api-key-42"
	ctx, span := p.StartDecision(context.Background(), "/v1/search", "free", limiter.GCRA)
	d, err := lim.Allow(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	EndDecision(span, limiter.StatusAllowed, d, nil)
	col.RecordDecision(ctx, limiter.Record{Endpoint: "/v1/search", Key: key, Limit: lim.Limit(), Status: limiter.StatusAllowed, Decision: d})

	decision := span.SpanContext()
	var children int
	for _, s := range spans.GetSpans() {
		if s.Parent.SpanID() == decision.SpanID() && s.SpanContext.TraceID() == decision.TraceID() {
			children++
		}
		for _, kv := range s.Attributes {
			if strings.Contains(kv.Value.Emit(), key) {
				t.Errorf("span %s attribute %s carries the client's key", s.Name, kv.Key)
			}
		}
	}
	if children == 0 {
		var names []string
		for _, s := range spans.GetSpans() {
			names = append(names, s.Name)
		}
		t.Fatalf("no Redis span under the decision span; spans: %v", names)
	}

	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set("Accept", "application/openmetrics-text;version=1.0.0")
	w := httptest.NewRecorder()
	col.Handler().ServeHTTP(w, req)
	if want := `# {trace_id="` + decision.TraceID().String() + `"}`; !strings.Contains(w.Body.String(), want) {
		t.Errorf("the scrape has no exemplar %s", want)
	}
	if !strings.Contains(w.Body.String(), `rate_limit_redis_duration_seconds_count{operation="gcra"} 1`) {
		t.Errorf("want exactly one store observation for the one decision")
	}
}

func TestInstrumentRedisRefusesNil(t *testing.T) {
	if err := Disabled().InstrumentRedis(nil); err == nil {
		t.Error("a nil client was accepted")
	}
}
