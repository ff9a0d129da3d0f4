package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/rl-exporter/rl-exporter/internal/redistest"
)

func TestBenchSharesReportsDecisionsFromSharesBesidePlainOnes(t *testing.T) {
	srv := redistest.Single(t)
	rep, stderr := benchJSON(t, "--store", "redis", "--redis-url", srv.URL(), "--shares", "--duration", "300ms",
		"--concurrency", "8", "--keys", "10", "--timeout", "2s")
	checkReport(t, rep)
	if rep.Mode != "shares" || rep.PlainDecisionsPerSecond <= 0 || rep.Errors != 0 || rep.Rejected != 0 {
		t.Fatalf("%+v", rep)
	}
	if r := rep.DecisionsPerSecond / rep.PlainDecisionsPerSecond; r != rep.SharesRatio {
		t.Fatalf("ratio %g, want %g", rep.SharesRatio, r)
	}
	if rep.ShareReservations <= 0 || rep.ShareGiveBacks != rep.ShareReservations || rep.SharesIntervalSeconds != 0.1 {
		t.Fatalf("chunks reserved %d, given back %d, interval %gs; want every chunk given back, 0.1s",
			rep.ShareReservations, rep.ShareGiveBacks, rep.SharesIntervalSeconds)
	}
	if rep.RedisCPUPerSharesSeconds <= 0 || rep.RedisCPUPerPlainSeconds <= 0 || rep.ClientCPUPerSharesSeconds <= 0 {
		t.Fatalf("Redis CPU a decision from shares %g, a plain one %g; client CPU %g",
			rep.RedisCPUPerSharesSeconds, rep.RedisCPUPerPlainSeconds, rep.ClientCPUPerSharesSeconds)
	}
	if !strings.Contains(stderr, "decisions from shares (interval 100ms), in 3 turns each") {
		t.Fatalf("stderr does not say what runs:\n%s", stderr)
	}
	var stdout, errs bytes.Buffer
	args := []string{"bench", "--store", "redis", "--redis-url", srv.URL(), "--shares", "--shares-interval", "50ms", "--duration", "200ms", "--concurrency", "2", "--keys", "5"}
	if code := run(context.Background(), args, nil, &stdout, &errs); code != exitOK {
		t.Fatalf("exit %d: %s", code, errs.String())
	}
	for _, want := range []string{"plain ", "shares ", "× the plain decisions", "interval 50ms", "redis cpu ", "a decision from shares", "p99"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, stdout.String())
		}
	}
}

func TestBenchSharesRejectsBadFlagValuesNamingTheFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		flag string
	}{
		{[]string{"--shares"}, "--store redis"},
		{[]string{"--shares", "--store", "redis", "--redis-url", "redis://127.0.0.1:1", "--mode", "reserve"}, "--mode decide"},
		{[]string{"--shares", "--store", "redis", "--redis-url", "redis://127.0.0.1:1", "--algorithm", "leaky_bucket"}, "nodelay"},
		{[]string{"--shares", "--store", "redis", "--redis-url", "redis://127.0.0.1:1", "--shares-interval", "0s"}, "--shares-interval"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), append([]string{"bench"}, c.args...), nil, &stdout, &stderr)
		if code != exitUsage || !strings.Contains(stderr.String(), c.flag) {
			t.Fatalf("%v: exit %d, stderr:\n%s", c.args, code, stderr.String())
		}
	}
}
