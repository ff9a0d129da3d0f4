package collector

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/rl-exporter/rl-exporter/collector/buckets"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/tracing"
)

const openMetricsAccept = "application/openmetrics-text;version=1.0.0"

func scrape(t *testing.T, h http.Handler, accept string) (string, string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", w.Code, w.Body)
	}
	return w.Body.String(), w.Header().Get("Content-Type")
}

// record makes a little realistic traffic through a real limiter on the
// memory store, with the collector as its observer and recorder.
func record(t *testing.T, c *Collector, ctx context.Context) {
	t.Helper()
	lim, err := limiter.New(limiter.Config{Limit: limiter.PerMinute(limiter.TokenBucket, 5), Store: limiter.NewMemoryStore(limiter.MemoryConfig{}), Observer: c})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		d, err := lim.Allow(ctx, "client-a")
		if err != nil {
			t.Fatal(err)
		}
		status := limiter.StatusAllowed
		if !d.Allowed {
			status = limiter.StatusRejected
		}
		c.RecordDecision(ctx, limiter.Record{Endpoint: "/v1/search", PlanTier: []string{"free", "pro"}[i%2], Key: "client-a", Limit: lim.Limit(), Status: status, Decision: d})
	}
	if err := c.SetLimit("/v1/search", "free", lim.Limit()); err != nil {
		t.Fatal(err)
	}
}

func TestMetricsPassPromtoolCheckMetrics(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool not found (Debian package prometheus; `make deps` installs it): %v", err)
	}
	for _, native := range []bool{false, true} {
		t.Run(fmt.Sprintf("native histograms %v", native), func(t *testing.T) {
			c := newTestCollector(t, Config{Endpoints: []string{"/v1/search", "/v1/users/{id}"}, Tiers: []string{"free", "pro"}, NativeHistograms: native})
			record(t, c, context.Background())
			body, _ := scrape(t, c.Handler(), "")
			if !strings.Contains(body, `rate_limit_requests_total{endpoint="/v1/search",plan_tier="free",status="allowed"} 3`) {
				t.Fatalf("the scrape lacks the recorded decisions:\n%s", body)
			}
			cmd := exec.Command(promtool, "check", "metrics")
			cmd.Stdin = strings.NewReader(body)
			out, err := cmd.CombinedOutput()
			if err != nil || len(bytes.TrimSpace(out)) > 0 {
				t.Fatalf("promtool check metrics: %v\n%s", err, out)
			}
		})
	}
}

// exemplarLine matches a classic bucket line that carries a trace_id exemplar.
var exemplarLine = regexp.MustCompile(`(?m)^rate_limit_redis_duration_seconds_bucket\{operation="gcra",le="([^"]+)"\} \d+ # \{trace_id="([0-9a-f]{32})"\} ([0-9.e-]+) [0-9.e+]+$`)

func TestExemplarsCarryTheTraceIDOfSampledSpans(t *testing.T) {
	for _, native := range []bool{false, true} {
		t.Run(fmt.Sprintf("native histograms %v", native), func(t *testing.T) {
			spans := tracetest.NewInMemoryExporter()
			tp := tracing.NewWithSDK(sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans)))
			defer tp.Shutdown(context.Background())
			c := newTestCollector(t, Config{Endpoints: []string{"/v1/search"}, Exemplars: tp.Enabled(), NativeHistograms: native})

			ctx, span := tp.StartDecision(context.Background(), "/v1/search", "free", limiter.GCRA)
			c.ObserveStore(ctx, "gcra", 7*time.Millisecond, nil)
			tracing.EndDecision(span, limiter.StatusAllowed, limiter.Decision{Allowed: true, Limit: 10, Remaining: 9}, nil)

			body, ctype := scrape(t, c.Handler(), openMetricsAccept)
			if !strings.HasPrefix(ctype, "application/openmetrics-text") {
				t.Fatalf("Content-Type = %q, want OpenMetrics when the scraper asks for it", ctype)
			}
			m := exemplarLine.FindStringSubmatch(body)
			if m == nil {
				t.Fatalf("no trace_id exemplar on rate_limit_redis_duration_seconds:\n%s", grepLines(body, "rate_limit_redis_duration_seconds_bucket{operation=\"gcra\""))
			}
			if want := span.SpanContext().TraceID().String(); m[2] != want {
				t.Errorf("exemplar trace_id = %s, want the decision span's %s", m[2], want)
			}
			if m[1] != "0.01" || m[3] != "0.007" {
				t.Errorf("exemplar on bucket le=%s with value %s, want le=0.01 and 0.007", m[1], m[3])
			}
			if got := len(spans.GetSpans()); got != 1 {
				t.Errorf("%d spans exported, want the decision span", got)
			}
		})
	}
}

func TestNoExemplarWithoutASampledSpan(t *testing.T) {
	sampled := sdktrace.NewTracerProvider()
	unsampled := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
	cases := []struct {
		name      string
		exemplars bool
		tp        *sdktrace.TracerProvider
	}{
		{"tracing on but the span is not sampled", true, unsampled},
		{"a sampled span but exemplars off", false, sampled},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestCollector(t, Config{Exemplars: tc.exemplars})
			ctx, span := tc.tp.Tracer("test").Start(context.Background(), "decision")
			c.ObserveStore(ctx, "gcra", time.Millisecond, nil)
			span.End()
			body, _ := scrape(t, c.Handler(), openMetricsAccept)
			if strings.Contains(body, "trace_id") {
				t.Errorf("exemplar present:\n%s", grepLines(body, "trace_id"))
			}
			if !strings.Contains(body, `rate_limit_redis_duration_seconds_count{operation="gcra"} 1`) {
				t.Errorf("the observation is missing")
			}
		})
	}
}

func TestNativeHistogramServedAlongsideTheClassicBuckets(t *testing.T) {
	c := newTestCollector(t, Config{NativeHistograms: true})
	c.ObserveStore(context.Background(), "sliding_log", 2*time.Millisecond, nil)
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set("Accept", `application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited`)
	w := httptest.NewRecorder()
	c.Handler().ServeHTTP(w, req)
	dec := expfmt.NewDecoder(w.Body, expfmt.ResponseFormat(w.Header()))
	for {
		var mf dto.MetricFamily
		if err := dec.Decode(&mf); err != nil {
			if errors.Is(err, io.EOF) {
				t.Fatal("rate_limit_redis_duration_seconds not in the protobuf scrape")
			}
			t.Fatal(err)
		}
		if mf.GetName() != "rate_limit_redis_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if labelsOf(m)["operation"] != "sliding_log" {
				continue
			}
			h := m.GetHistogram()
			if len(h.GetBucket()) != len(buckets.StoreDuration()) {
				t.Errorf("%d classic buckets, want %d", len(h.GetBucket()), len(buckets.StoreDuration()))
			}
			if h.Schema == nil || len(h.GetPositiveSpan()) == 0 {
				t.Errorf("no native histogram (schema %v, spans %v)", h.Schema, h.GetPositiveSpan())
			}
			return
		}
	}
}

func grepLines(s, substr string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
