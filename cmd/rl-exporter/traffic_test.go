package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/eventually"
)

func TestTrafficSendsAndReportsWhatClientsGot(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.Header.Get("X-User-ID"), "abusive-") {
			w.WriteHeader(http.StatusTooManyRequests)
		}
	}))
	defer srv.Close()
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"traffic", "--target", srv.URL, "--normal", "2", "--normal-rate", "20",
		"--abusive", "1", "--abusive-rate", "40", "--duration", "500ms", "--report-every", "200ms"},
		nil, &out, &errOut)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	// The well-behaved clients got only 200s and the abusive one only 429s,
	// each reported apart.
	done := regexp.MustCompile(`traffic: done, normal: sent \d+: 200=\d+, errors 0 \| abusive: sent \d+: 429=\d+, errors 0`)
	progress := regexp.MustCompile(`(?m)^traffic: normal: sent \d+: .* \| abusive: sent \d+: `)
	if !done.MatchString(out.String()) || !progress.MatchString(out.String()) {
		t.Fatalf("output lacks the reports:\n%s", out.String())
	}
}

func TestTrafficReportsEveryTwoSecondsByDefault(t *testing.T) {
	var out, errOut bytes.Buffer
	run(context.Background(), []string{"traffic", "-h"}, nil, &out, &errOut)
	if !regexp.MustCompile(`-report-every duration\s+print the counts this often \(default 2s\)`).MatchString(errOut.String()) {
		t.Fatalf("help does not show a 2s default:\n%s", errOut.String())
	}
}

func TestTrafficRefusesBadFlags(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want int
	}{
		{"no normal client is a usage error", []string{"--normal", "0"}, exitUsage},
		{"an unknown flag is a usage error", []string{"--clients", "3"}, exitUsage},
		{"a target that is not a URL is invalid", []string{"--target", "localhost:8480", "--duration", "1s"}, exitFailure},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if code := run(context.Background(), append([]string{"traffic"}, c.args...), nil, &out, &errOut); code != c.want {
				t.Fatalf("exit %d, want %d: %s", code, c.want, errOut.String())
			}
		})
	}
}

// sinkOutput is written by the command and read by the test.
type sinkOutput struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *sinkOutput) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *sinkOutput) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestAlertSinkLogsEachAlertItReceives(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var out sinkOutput
	var errOut bytes.Buffer
	exited := make(chan int)
	go func() {
		exited <- run(ctx, []string{"alert-sink", "--listen", "127.0.0.1:0"}, nil, &out, &errOut)
	}()
	urlRe := regexp.MustCompile(`url=(http://\S+)`)
	var url string
	eventually.Within(10*time.Second, func() bool {
		if m := urlRe.FindStringSubmatch(out.String()); m != nil {
			url = m[1]
		}
		return url != ""
	})
	if url == "" {
		cancel()
		t.Fatalf("the sink never said where it listens: %s %s", out.String(), errOut.String())
	}
	body := `{"version":"4","status":"firing","receiver":"rl-exporter-page","alerts":[{"status":"firing","labels":{"alertname":"RateLimitFailOpen","severity":"page"},"annotations":{"summary":"Requests pass unchecked"}}]}`
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	cancel()
	if code := <-exited; code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	for _, want := range []string{"alertname=RateLimitFailOpen", "severity=page", "receiver=rl-exporter-page", `summary="Requests pass unchecked"`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("log lacks %s:\n%s", want, out.String())
		}
	}
}

// With --tiers, traffic prints the answers of each tier; with serve's
// config, of each priority its overload limit admits by, the class's and
// the tier's.
func TestTrafficPrintsTheAnswersByTierAndPriority(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Plan-Tier") == "free" && r.URL.Path != "/batch" {
			w.WriteHeader(http.StatusServiceUnavailable) // shed, as an overloaded serve sheds sheddable requests
		}
	}))
	defer srv.Close()
	conf := filepath.Join(t.TempDir(), "overload.yaml")
	if err := os.WriteFile(conf, []byte(`server:
  upstream: "http://127.0.0.1:8481"
  overload: {enabled: true, target: 500ms}
tiers: {names: [free, enterprise], default: free, header: X-Plan-Tier}
identity: {trusted_header_peers: [127.0.0.1/32]}
classes:
  default:
    priority: sheddable
    limits:
      free: {algorithm: gcra, rate: 10000, period: 1s}
      enterprise: {algorithm: gcra, rate: 10000, period: 1s, priority: critical}
  batch:
    routes: ["POST /batch"]
    priority: default
    limits: {free: {algorithm: gcra, rate: 10000, period: 1s}}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"traffic", "--target", srv.URL, "--normal", "4", "--normal-rate", "20", "--abusive", "0",
		"--tiers", "free,enterprise", "--normal-paths", "GET /api,POST /batch", "--config", conf, "--duration", "600ms", "--report-every", "200ms"},
		nil, &out, &errOut)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	done := out.String()[strings.LastIndex(out.String(), "traffic: done, "):]
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^traffic:   tier enterprise: sent [1-9]\d*: 200=[1-9]\d*, errors 0$`),
		regexp.MustCompile(`(?m)^traffic:   tier free: sent [1-9]\d*: 200=[1-9]\d* 503=[1-9]\d*, errors 0$`),
		regexp.MustCompile(`(?m)^traffic:   priority critical: sent [1-9]\d*: 200=[1-9]\d*, errors 0$`),
		regexp.MustCompile(`(?m)^traffic:   priority default: sent [1-9]\d*: 200=[1-9]\d*, errors 0$`),
		regexp.MustCompile(`(?m)^traffic:   priority sheddable: sent [1-9]\d*: 503=[1-9]\d*, errors 0$`),
	} {
		if !want.MatchString(done) {
			t.Errorf("the final report has no line %s:\n%s", want, done)
		}
	}
	var out2, errOut2 bytes.Buffer
	code = run(context.Background(), []string{"traffic", "--target", srv.URL, "--config", filepath.Join(t.TempDir(), "none.yaml"), "--duration", "1s"}, nil, &out2, &errOut2)
	if code != exitFailure || !strings.Contains(errOut2.String(), "--config") {
		t.Errorf("a missing --config file: exit %d, stderr %q; want 1 naming --config", code, errOut2.String())
	}
}
