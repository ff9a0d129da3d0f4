package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/rl-exporter/rl-exporter/internal/redistest"
)

// benchJSON runs rl-exporter bench with --json and decodes the last line of
// standard output.
func benchJSON(t *testing.T, args ...string) (benchReport, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), append([]string{"bench", "--json"}, args...), nil, &stdout, &stderr)
	if code != exitOK {
		t.Fatalf("bench %v: exit %d, stderr:\n%s", args, code, stderr.String())
	}
	lines := strings.Split(strings.TrimRight(stdout.String(), "\n"), "\n")
	last := lines[len(lines)-1]
	var rep benchReport
	dec := json.NewDecoder(strings.NewReader(last))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("last line of stdout is not the JSON report: %v\n%s", err, stdout.String())
	}
	// The keys scripts read must be there under their documented names.
	var raw map[string]any
	if err := json.Unmarshal([]byte(last), &raw); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"decisions_per_second", "allowed", "rejected", "errors", "p50_seconds", "p99_seconds", "p999_seconds"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("JSON report lacks %q: %s", k, last)
		}
	}
	return rep, stderr.String()
}

// checkReport asserts what holds for any successful run.
func checkReport(t *testing.T, rep benchReport) {
	t.Helper()
	if rep.Decisions == 0 || rep.DecisionsPerSecond <= 0 {
		t.Fatalf("no decisions: %+v", rep)
	}
	if rep.Allowed+rep.Rejected+rep.Errors != rep.Decisions {
		t.Fatalf("allowed %d + rejected %d + errors %d != decisions %d", rep.Allowed, rep.Rejected, rep.Errors, rep.Decisions)
	}
	if !(0 < rep.P50Seconds && rep.P50Seconds <= rep.P90Seconds && rep.P90Seconds <= rep.P99Seconds &&
		rep.P99Seconds <= rep.P999Seconds && rep.P999Seconds <= rep.MaxSeconds) {
		t.Fatalf("percentiles out of order: p50 %g p90 %g p99 %g p999 %g max %g",
			rep.P50Seconds, rep.P90Seconds, rep.P99Seconds, rep.P999Seconds, rep.MaxSeconds)
	}
	if rep.DurationSeconds < 0.3 || rep.DurationSeconds > 30 {
		t.Fatalf("duration_seconds = %g for a 0.3s run", rep.DurationSeconds)
	}
}

func TestBenchOnTheMemoryStoreReportsDecisionsAndOrderedPercentiles(t *testing.T) {
	rep, stderr := benchJSON(t, "--store", "memory", "--duration", "300ms", "--concurrency", "4", "--keys", "1000")
	checkReport(t, rep)
	if rep.Errors != 0 || rep.Rejected != 0 {
		t.Fatalf("a high default limit should allow everything: %+v", rep)
	}
	if rep.Store != "memory" || rep.Algorithm != "gcra" || rep.Concurrency != 4 || rep.Keys != 1000 {
		t.Fatalf("report does not echo the run: %+v", rep)
	}
	if strings.Contains(stderr, "\r") {
		t.Fatalf("progress bar drawn although stderr is not a terminal:\n%q", stderr)
	}
}

func TestBenchWithALimitTooLowRejectsAllButTheQuota(t *testing.T) {
	// 3 keys, a gcra burst of 5 each, refilled once in 12 minutes: exactly
	// 15 decisions can be allowed during a short run, whatever the callers do.
	rep, _ := benchJSON(t, "--store", "memory", "--algorithm", "gcra", "--limit", "5/h",
		"--keys", "3", "--zipf", "1.5", "--duration", "300ms", "--concurrency", "8")
	checkReport(t, rep)
	if rep.Allowed != 15 || rep.Rejected == 0 {
		t.Fatalf("allowed %d, rejected %d; want exactly 15 allowed and the rest rejected", rep.Allowed, rep.Rejected)
	}
}

func TestBenchPrintsAReadableReportWithoutJSON(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"bench", "--duration", "300ms", "--algorithm", "fixed_window", "--limit", "100/10s"},
		nil, &stdout, &stderr)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	for _, want := range []string{"decisions", "/s)", "allowed", "rejected", "errors", "p50", "p99", "p99.9", "fixed_window 100/10s"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, stdout.String())
		}
	}
}

func TestBenchRejectsBadFlagValuesNamingTheFlag(t *testing.T) {
	cases := []struct {
		name string
		args []string
		flag string
	}{
		{"an unknown store", []string{"--store", "etcd"}, "--store"},
		{"an unknown algorithm", []string{"--algorithm", "leaky"}, "--algorithm"},
		{"a limit without a period", []string{"--limit", "100"}, "--limit"},
		{"a limit of zero", []string{"--limit", "0/s"}, "--limit"},
		{"a limit with a bad period", []string{"--limit", "10/fortnight"}, "--limit"},
		{"zero callers", []string{"--concurrency", "0"}, "--concurrency"},
		{"callers that are not a number", []string{"--concurrency", "many"}, "-concurrency"},
		{"zero keys", []string{"--keys", "0"}, "--keys"},
		{"a zipf skew of one", []string{"--zipf", "1"}, "--zipf"},
		{"a negative duration", []string{"--duration", "-1s"}, "--duration"},
		{"a negative burst", []string{"--burst", "-3"}, "--burst"},
		{"redis without an address", []string{"--store", "redis"}, "--redis-url"},
		{"both a URL and cluster addresses", []string{"--store", "redis", "--redis-url", "redis://127.0.0.1:1/0", "--cluster-addrs", "127.0.0.1:2"}, "--cluster-addrs"},
		{"a redis URL for the memory store", []string{"--redis-url", "redis://127.0.0.1:1/0"}, "--store redis"},
		{"empty cluster addresses", []string{"--store", "redis", "--cluster-addrs", " , "}, "--cluster-addrs"},
		{"a redis URL that does not parse", []string{"--store", "redis", "--redis-url", "http://example/"}, "--redis-url"},
		{"a negative pool size", []string{"--store", "redis", "--redis-url", "redis://127.0.0.1:1/0", "--pool-size", "-1"}, "--pool-size"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), append([]string{"bench"}, tc.args...), nil, &stdout, &stderr)
			if code != exitUsage {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, exitUsage, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.flag) {
				t.Fatalf("stderr does not name %s:\n%s", tc.flag, stderr.String())
			}
			if stdout.Len() != 0 {
				t.Fatalf("stdout not empty on a usage error: %q", stdout.String())
			}
		})
	}
}

func TestBenchOnASingleRedisReportsDecisionsAndOrderedPercentiles(t *testing.T) {
	srv := redistest.Single(t)
	for _, alg := range []string{"gcra", "fixed_window"} {
		rep, _ := benchJSON(t, "--store", "redis", "--redis-url", srv.URL(), "--algorithm", alg,
			"--duration", "300ms", "--concurrency", "8", "--keys", "100", "--timeout", "2s")
		checkReport(t, rep)
		if rep.Errors != 0 || rep.Rejected != 0 {
			t.Fatalf("%s: want every decision allowed without error: %+v", alg, rep)
		}
		if !strings.Contains(rep.Store, srv.Addr()) {
			t.Fatalf("store %q does not name the server %s", rep.Store, srv.Addr())
		}
	}
}

func TestBenchOnRedisWithALimitTooLowRejectsAllButTheQuota(t *testing.T) {
	srv := redistest.Single(t)
	rep, _ := benchJSON(t, "--store", "redis", "--redis-url", srv.URL(), "--algorithm", "gcra", "--limit", "5/h",
		"--keys", "3", "--duration", "300ms", "--concurrency", "8", "--timeout", "2s")
	checkReport(t, rep)
	if rep.Allowed != 15 || rep.Rejected == 0 || rep.Errors != 0 {
		t.Fatalf("allowed %d, rejected %d, errors %d; want exactly 15 allowed, the rest rejected", rep.Allowed, rep.Rejected, rep.Errors)
	}
}

func TestBenchOnARedisClusterOfThreeMastersSpreadsKeysAndDecides(t *testing.T) {
	cl := redistest.Cluster(t, 3)
	// fixed_window keys live until their window ends, so they can be counted after the run.
	rep, _ := benchJSON(t, "--store", "redis", "--cluster-addrs", strings.Join(cl.Addrs, ","), "--algorithm", "fixed_window", "--limit", "1000000/h",
		"--duration", "300ms", "--concurrency", "8", "--keys", "1000", "--timeout", "2s")
	checkReport(t, rep)
	if rep.Errors != 0 || rep.Rejected != 0 {
		t.Fatalf("want every decision allowed without error: %+v", rep)
	}
	// Every master must have taken part: the keys' hash tags spread them.
	for i, n := range cl.Nodes {
		v, err := n.Do("DBSIZE")
		if err != nil {
			t.Fatal(err)
		}
		if size, _ := v.(int64); size == 0 {
			t.Errorf("master %d (%s) holds no key after the run", i, cl.Addrs[i])
		}
	}
}

func TestBenchAgainstARedisThatIsNotThereFailsBeforeRunning(t *testing.T) {
	srv := redistest.Single(t)
	url := srv.URL()
	srv.Stop()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"bench", "--store", "redis", "--redis-url", url, "--duration", "10s"},
		nil, &stdout, &stderr)
	if code != exitFailure {
		t.Fatalf("exit %d, want %d; stderr:\n%s", code, exitFailure, stderr.String())
	}
	if !strings.Contains(stderr.String(), srv.Addr()) {
		t.Fatalf("error does not name the address %s:\n%s", srv.Addr(), stderr.String())
	}
}

func TestBenchOnRedisReportsRedisCPUBesideOursAndTheCeiling(t *testing.T) {
	srv := redistest.Single(t)
	rep, _ := benchJSON(t, "--store", "redis", "--redis-url", srv.URL(), "--algorithm", "gcra",
		"--duration", "300ms", "--concurrency", "8", "--keys", "1000", "--timeout", "2s")
	checkReport(t, rep)
	if !(rep.RedisCPUMicrosPerDecision > 0 && rep.OwnCPUMicrosPerDecision > 0) {
		t.Fatalf("want Redis's and our CPU per decision: %+v", rep)
	}
	if !(rep.CeilingDecisionsPerSecond > 0 && rep.CeilingRedisCPUMicrosPerDecision > 0 && rep.CeilingBatch > 1) {
		t.Fatalf("want the ceiling's decisions per second and Redis CPU per decision: %+v", rep)
	}
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"bench", "--store", "redis", "--redis-url", srv.URL(),
		"--duration", "300ms", "--concurrency", "8", "--keys", "100", "--timeout", "2s"}, nil, &stdout, &stderr)
	if code != exitOK {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr.String())
	}
	for _, want := range []string{"redis cpu ", "ours ", "ceiling "} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, stdout.String())
		}
	}
}
