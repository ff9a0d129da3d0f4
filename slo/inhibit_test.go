package slo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// The inhibit rules are proven on a running Alertmanager 0.25 with the
// committed configuration: alerts are posted to its API as Prometheus would,
// and its own view of each alert (active, or suppressed and by what) is
// what on-call people would see.
func TestAlertmanagerInhibitsWhereOneCauseWouldAlertTwice(t *testing.T) {
	bin := ""
	for _, name := range []string{"prometheus-alertmanager", "alertmanager"} {
		if p, err := exec.LookPath(name); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		t.Fatal("Alertmanager is not installed; run `make deps` (Debian package prometheus-alertmanager)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	addr := freeAddr(t)
	cmd := exec.Command(bin,
		"--config.file="+filepath.Join(repoRoot, filepath.FromSlash(AlertmanagerPath)),
		"--storage.path="+t.TempDir(), "--web.listen-address="+addr,
		"--cluster.listen-address=", "--log.level=error")
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("alertmanager output:\n%s", logs.String())
		}
	})
	base := "http://" + addr
	waitFor(ctx, t, "Alertmanager ready", func() (bool, error) {
		select {
		case <-exited:
			return false, fmt.Errorf("alertmanager exited: %s", cmd.ProcessState)
		default:
		}
		resp, err := http.Get(base + "/-/ready")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})

	latency := map[string]string{"alertname": AlertStoreLatencyHigh, "severity": "warning", "operation": "decide", "service": "rl-exporter", "team": "platform"}
	failOpen := map[string]string{"alertname": AlertFailOpen, "severity": "page", "job": "rl-exporter", "service": "rl-exporter", "team": "platform"}
	burn := func(job, severity, long, short string) map[string]string {
		return map[string]string{"alertname": AlertErrorBudgetBurn, "severity": severity, "job": job,
			"long_window": long, "short_window": short, "service": "rl-exporter", "team": "platform"}
	}
	burnPage := burn("rl-exporter", "page", "1h", "5m")
	burnTicket := burn("rl-exporter", "ticket", "1d", "2h")
	otherJobTicket := burn("other-limiter", "ticket", "1d", "2h")
	region := func(alert, severity, peer string) map[string]string {
		return map[string]string{"alertname": alert, "severity": severity, "peer_region": peer, "service": "rl-exporter", "team": "platform"}
	}
	lagJP := region(AlertRegionSyncLagHigh, "warning", "ap-northeast-1")
	lagEU := region(AlertRegionSyncLagHigh, "warning", "eu-west-1")
	lostJP := region(AlertRegionUnreachable, "page", "ap-northeast-1")
	giveBacks := func(job string) map[string]string {
		return map[string]string{"alertname": AlertSharesGiveBacksFailing, "severity": "warning", "job": job, "service": "rl-exporter", "team": "platform"}
	}
	giveBacksHere, giveBacksEdge, giveBacksOther := giveBacks("rl-exporter"), giveBacks("edge-limiter"), giveBacks("other-limiter")

	// Alone, the latency warning, the burn tickets, the lag warnings and
	// the pages on failing give-backs of local shares reach on-call.
	post(t, base, latency, burnTicket, otherJobTicket, lagJP, lagEU, giveBacksHere, giveBacksEdge, giveBacksOther)
	waitState(ctx, t, base, latency, "active")
	waitState(ctx, t, base, burnTicket, "active")
	waitState(ctx, t, base, lagJP, "active")
	waitState(ctx, t, base, giveBacksHere, "active")

	// A fail-open page says it all: the store is failing, so it is slow.
	// A burn page makes the ticket of the same burn redundant, but not the
	// ticket of another job's burn.
	post(t, base, failOpen, burnPage)
	waitState(ctx, t, base, latency, "suppressed")
	waitState(ctx, t, base, burnTicket, "suppressed")
	waitState(ctx, t, base, failOpen, "active")
	waitState(ctx, t, base, burnPage, "active")
	waitState(ctx, t, base, otherJobTicket, "active")
	// Give-backs fail when the store fails: a page on that job's store
	// failing (fail-open here, a burn page on edge-limiter) makes theirs
	// redundant, not another job's.
	waitState(ctx, t, base, giveBacksHere, "suppressed")
	waitState(ctx, t, base, giveBacksEdge, "active")
	post(t, base, burn("edge-limiter", "page", "1h", "5m"))
	waitState(ctx, t, base, giveBacksEdge, "suppressed")
	waitState(ctx, t, base, giveBacksOther, "active")

	// A lost peer's lag grows past the warning too: the page on that peer
	// makes its warning redundant, not another peer's.
	post(t, base, lostJP)
	waitState(ctx, t, base, lagJP, "suppressed")
	waitState(ctx, t, base, lostJP, "active")
	waitState(ctx, t, base, lagEU, "active")
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func waitFor(ctx context.Context, t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	for {
		ok, err := cond()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if ok {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: timed out", what)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// post sends firing alerts to Alertmanager's API, as Prometheus does.
func post(t *testing.T, base string, alerts ...map[string]string) {
	t.Helper()
	now := time.Now().UTC()
	var body []map[string]any
	for _, labels := range alerts {
		body = append(body, map[string]any{"labels": labels, "startsAt": now, "endsAt": now.Add(10 * time.Minute)})
	}
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(base+"/api/v2/alerts", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /api/v2/alerts: %s", resp.Status)
	}
}

// waitState waits until Alertmanager reports the alert with exactly these
// labels in state (active or suppressed); a suppressed alert must name the
// alert that inhibits it.
func waitState(ctx context.Context, t *testing.T, base string, labels map[string]string, state string) {
	t.Helper()
	last := "not listed"
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		got, err := alertState(base, labels)
		if err != nil {
			t.Fatal(err)
		}
		if got == state {
			return
		}
		last = got
		select {
		case <-ctx.Done():
			t.Fatalf("%s %v: state %s, want %s", labels["alertname"], labels, last, state)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func alertState(base string, labels map[string]string) (string, error) {
	resp, err := http.Get(base + "/api/v2/alerts")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var alerts []struct {
		Labels map[string]string `json:"labels"`
		Status struct {
			State       string   `json:"state"`
			InhibitedBy []string `json:"inhibitedBy"`
		} `json:"status"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&alerts); err != nil {
		return "", fmt.Errorf("GET /api/v2/alerts: %w", err)
	}
	for _, a := range alerts {
		if !equalLabels(a.Labels, labels) {
			continue
		}
		if a.Status.State == "suppressed" && len(a.Status.InhibitedBy) == 0 {
			return "suppressed by no inhibition", nil
		}
		return a.Status.State, nil
	}
	return "not listed", nil
}

func equalLabels(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
