package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestCompareRunsEveryLimiterAndPrintsOneTableWithRatios(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"--duration", "150ms", "--warmup", "50ms", "--callers", "1,4", "--keys", "100"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr.String())
	}
	out := stdout.String()
	var rows []string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "| redis |") || strings.HasPrefix(line, "| memory |") {
			rows = append(rows, line)
		}
	}
	// 5 Redis and 4 memory limiters, at 2 caller counts.
	if len(rows) != 18 {
		t.Fatalf("%d table rows, want 18:\n%s", len(rows), out)
	}
	for _, name := range []string{"rl-exporter gcra", "rl-exporter fixed_window", "rl-exporter gcra, batching off", "redis_rate v10 (GCRA) (baseline)",
		"ulule/limiter v3 (fixed window)", "x/time/rate + mutex map (baseline)", "rl-exporter token_bucket"} {
		if !strings.Contains(out, "| "+name+" |") {
			t.Errorf("no row for %s:\n%s", name, out)
		}
	}
	for _, r := range rows {
		if strings.Contains(r, "rejected") || strings.Contains(r, "errors") {
			t.Errorf("a decision was refused or failed: %s", r)
		}
		if strings.Contains(r, "(baseline)") && !strings.Contains(r, "| 1.00× | 1.00× |") {
			t.Errorf("baseline row is not 1.00× of itself: %s", r)
		}
		if strings.Contains(r, "| – |") {
			t.Errorf("row without a ratio: %s", r)
		}
	}
	if !strings.Contains(out, "redis-server ") {
		t.Errorf("the table does not say which Redis it measured:\n%s", out)
	}
}

func TestCompareRejectsBadFlagsNamingThem(t *testing.T) {
	for _, args := range [][]string{{"--callers", "0"}, {"--duration", "0s"}, {"--stores", "etcd"}, {"--only", "("},
		{"--gobench", "-1"}, {"--gobench", "2"}, {"--benchtime", "0s"}} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), args, &stdout, &stderr); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
		if !strings.Contains(stderr.String(), args[0]) {
			t.Errorf("%v: stderr does not name the flag: %s", args, stderr.String())
		}
	}
}

func TestGoBenchmarksCompareTheMemoryStoreWithXTimeRateAndPrintTheRatios(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"--stores", "memory", "--gobench", "2", "--benchtime", "20ms", "--keys", "100"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr.String())
	}
	out := stdout.String()
	rows := 0
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "| benchmark") {
			continue
		}
		rows++
		// Every decision over an existing key allocates nothing.
		if cells := strings.Split(line, " | "); len(cells) < 6 || cells[3] != "0" {
			t.Errorf("row without 0 allocs/op: %s", line)
		}
		if strings.Contains(line, "(baseline)") && !strings.HasSuffix(line, "| 1.00× |") {
			t.Errorf("baseline row is not 1.00× of itself: %s", line)
		}
	}
	// gcra, token_bucket, fixed_window and the baseline, serial and in
	// parallel on shared and on distinct keys.
	if rows != 12 {
		t.Fatalf("%d table rows, want 12:\n%s", rows, out)
	}
	for _, want := range []string{"gcra/serial", "token_bucket/parallel", "fixed_window/serial", "xrate_mutex_map/parallel (baseline)",
		"ratio to x/time/rate + mutex map (goal ≥ 1.50×): gcra/serial "} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestCompareOnRedisPrintsRedisCPUPerDecisionOfEveryRedisLimiter(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"--stores", "redis", "--duration", "150ms", "--warmup", "50ms", "--callers", "4", "--keys", "100"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr.String())
	}
	out := stdout.String()
	_, cpuTable, ok := strings.Cut(out, "Redis's own CPU per decision")
	if !ok {
		t.Fatalf("no Redis CPU table:\n%s", out)
	}
	for _, name := range []string{"rl-exporter gcra", "rl-exporter fixed_window", "redis_rate v10 (GCRA)", "ulule/limiter v3 (fixed window)"} {
		if !strings.Contains(cpuTable, "| 4 | "+name+" | ") {
			t.Errorf("no Redis CPU row for %s:\n%s", name, cpuTable)
		}
	}
	if !strings.Contains(cpuTable, "| 4 | redis_rate v10 (GCRA) | ") || !strings.Contains(cpuTable, " | 1.00× |") {
		t.Errorf("the baseline's row is not 1.00× of itself:\n%s", cpuTable)
	}
}
