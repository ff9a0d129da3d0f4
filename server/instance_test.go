package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/app"
	"github.com/rl-exporter/rl-exporter/config"
	"github.com/rl-exporter/rl-exporter/internal/eventually"
)

// lockedBuffer is a log destination safe for concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// instance is one serve process built in this process: its decision API
// called directly (no network), its /metrics and its log.
type instance struct {
	srv   *app.Built
	tel   *app.Telemetry
	check http.Handler
	logs  *lockedBuffer
}

func buildInstance(t *testing.T, yaml string) *instance {
	t.Helper()
	cfg, err := config.Parse("rl.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	tel, err := app.NewTelemetry(context.Background(), cfg, app.TelemetryInfo{TraceWriter: io.Discard, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := app.Build(cfg, tel.Deps(logger))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The Redis store's batch senders exit after being idle for 2s;
		// the package's leak check must not take them for leaks.
		buf := make([]byte, 1<<20)
		eventually.Within(3*time.Second, func() bool {
			return !bytes.Contains(buf[:runtime.Stack(buf, true)], []byte("redisstore.(*lane).send"))
		})
	})
	serve(t, srv)
	return &instance{srv: srv, tel: tel, check: srv.Middleware().CheckHandler(), logs: logs}
}

// checkAnswer is the part of a /v1/check answer the tests read.
type checkAnswer struct {
	Allowed  bool   `json:"allowed"`
	Status   string `json:"status"`
	Degraded bool   `json:"degraded"`
}

func (in *instance) decide(ctx context.Context, t *testing.T, key string) (checkAnswer, int) {
	return in.decideOn(ctx, t, key, "GET /")
}

// decideOn asks the decision API for key on endpoint.
func (in *instance) decideOn(ctx context.Context, t *testing.T, key, endpoint string) (checkAnswer, int) {
	body := fmt.Sprintf(`{"key":%q,"endpoint":%q}`, key, endpoint)
	req := httptest.NewRequest(http.MethodPost, "/v1/check", strings.NewReader(body)).WithContext(ctx)
	rec := httptest.NewRecorder()
	in.check.ServeHTTP(rec, req)
	var a checkAnswer
	if rec.Code != 0 && rec.Body.Len() > 0 {
		if err := json.Unmarshal(rec.Body.Bytes(), &a); err != nil {
			t.Errorf("answer %q: %v", rec.Body.String(), err)
		}
	}
	return a, rec.Code
}

// hasSeries reports whether /metrics has a sample of the metric name.
func (in *instance) hasSeries(t *testing.T, name string) bool {
	t.Helper()
	rec := httptest.NewRecorder()
	in.tel.Collector.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	sc := bufio.NewScanner(rec.Body)
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, name+"{") || strings.HasPrefix(line, name+" ") {
			return true
		}
	}
	return false
}

// metric sums the samples of /metrics of the metric name whose labels
// include every one of labels (`key="value"`).
func (in *instance) metric(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	in.tel.Collector.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	sum := 0.0
	sc := bufio.NewScanner(rec.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		if slices.ContainsFunc(labels, func(l string) bool { return !strings.Contains(line, l) }) {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		sum += v
	}
	return sum
}
