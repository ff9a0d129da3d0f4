package deploy

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestLocalStackStartsEveryPartAndCtrlCStopsThem runs scripts/local-stack.sh
// on free ports: both replicas serve their metrics to Prometheus, and an
// interrupt leaves no program listening.
func TestLocalStackStartsEveryPartAndCtrlCStopsThem(t *testing.T) {
	for _, p := range []string{"redis-server", "prometheus", "go"} {
		requireTool(t, p)
	}
	ports := map[string]int{}
	// Grafana is not installed here: a stand-in grafana-server records how
	// the script starts it and listens where Grafana would.
	fake := t.TempDir()
	grafanaLog := filepath.Join(fake, "grafana.log")
	if err := os.WriteFile(filepath.Join(fake, "grafana-server"), []byte(fakeGrafana), 0o755); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "PATH="+fake+string(os.PathListSeparator)+os.Getenv("PATH"), "FAKE_GRAFANA_LOG="+grafanaLog)
	for _, name := range []string{"SERVE_A_PORT", "SERVE_B_PORT", "UPSTREAM_PORT", "REDIS_PORT", "PROMETHEUS_PORT", "ALERTMANAGER_PORT", "SINK_PORT", "GRAFANA_PORT"} {
		ports[name] = freePort(t)
		env = append(env, fmt.Sprintf("%s=%d", name, ports[name]))
	}
	cmd := exec.Command("bash", "../scripts/local-stack.sh", "--duration", "120")
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	var out syncBuilder
	running := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		closed := false
		for sc.Scan() {
			out.WriteString(sc.Text() + "\n")
			if !closed && strings.HasPrefix(sc.Text(), "local-stack: running") {
				close(running)
				closed = true
			}
		}
		exited <- cmd.Wait()
	}()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	})

	select {
	case <-running:
	case err := <-exited:
		stopped = true
		t.Fatalf("the script exited before running: %v\n%s", err, out.String())
	case <-time.After(90 * time.Second):
		t.Fatalf("the script did not start within 90s:\n%s", out.String())
	}

	// Prometheus scrapes both replicas.
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	query := `count(up{job="rl-exporter"} == 1)`
	u := fmt.Sprintf("http://127.0.0.1:%d/api/v1/query?query=%s", ports["PROMETHEUS_PORT"], url.QueryEscape(query))
	for {
		if n := instantValue(ctx, u); n == 2 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("Prometheus never scraped both replicas (%s)\n%s", query, out.String())
		case <-time.After(500 * time.Millisecond):
		}
	}
	for _, p := range []string{"SERVE_A_PORT", "SERVE_B_PORT"} {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", ports[p]))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), `rate_limit_requests_total{endpoint="GET /api/v1/orders/{id}"`) {
			t.Errorf("%s serves no decisions of the orders endpoint", p)
		}
	}

	// Grafana was started with the stack's provisioning: a data source at
	// this stack's Prometheus and the generated dashboards.
	started, err := os.ReadFile(grafanaLog)
	if err != nil {
		t.Fatalf("grafana-server was not started: %v\n%s", err, out.String())
	}
	for _, want := range []string{
		fmt.Sprintf("url: http://127.0.0.1:%d", ports["PROMETHEUS_PORT"]),
		fmt.Sprintf("cfg:default.server.http_port=%d", ports["GRAFANA_PORT"]),
		"dashboard: rl-exporter-overview.json",
		"provider path: $RL_STACK_DASHBOARDS",
	} {
		if !strings.Contains(string(started), want) {
			t.Errorf("Grafana's start lacks %q:\n%s", want, started)
		}
	}

	// Ctrl-C.
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
		stopped = true
	case <-time.After(30 * time.Second):
		t.Fatalf("the script did not stop within 30s of an interrupt:\n%s", out.String())
	}
	for name, port := range ports {
		if c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second); err == nil {
			c.Close()
			t.Errorf("%s (port %d) still listens after the interrupt", name, port)
		}
	}
	if !strings.Contains(out.String(), "local-stack: stopping") {
		t.Errorf("no stop message:\n%s", out.String())
	}
}

// fakeGrafana stands for grafana-server: it writes its arguments, the data
// source and dashboards it was given to $FAKE_GRAFANA_LOG, then listens on
// its port with the stack's own binary.
const fakeGrafana = `#!/usr/bin/env bash
for a in "$@"; do
  case $a in
    cfg:default.server.http_port=*) port=${a#*=} ;;
    cfg:default.paths.provisioning=*) prov=${a#*=} ;;
  esac
done
{
  echo "args: $*"
  grep -h 'url:' "$prov/datasources/"*.yml
  grep -h 'path:' "$prov/dashboards/"*.yml | sed 's/^ *path:/provider path:/'
  for f in "$RL_STACK_DASHBOARDS"/*.json; do echo "dashboard: $(basename "$f")"; done
} >"$FAKE_GRAFANA_LOG"
exec "${prov%/grafana/provisioning}/rl-exporter" demo-upstream --listen "127.0.0.1:$port"
`

// syncBuilder is a strings.Builder safe for one writer and other readers.
type syncBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuilder) WriteString(v string) {
	s.mu.Lock()
	s.b.WriteString(v)
	s.mu.Unlock()
}

func (s *syncBuilder) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// instantValue returns the value of a one-sample instant query, or -1.
func instantValue(ctx context.Context, u string) float64 {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	var body struct {
		Data struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || len(body.Data.Result) != 1 {
		return -1
	}
	s, _ := body.Data.Result[0].Value[1].(string)
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return -1
	}
	return v
}
