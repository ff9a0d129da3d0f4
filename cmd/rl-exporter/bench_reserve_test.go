package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/rl-exporter/rl-exporter/internal/redistest"
)

func TestBenchReserveModeReportsPairsBesidePlainDecisions(t *testing.T) {
	srv := redistest.Single(t)
	for _, store := range [][]string{{"--store", "memory"}, {"--store", "redis", "--redis-url", srv.URL()}} {
		rep, stderr := benchJSON(t, append(store, "--mode", "reserve", "--estimate", "5", "--algorithm", "token_bucket",
			"--duration", "300ms", "--concurrency", "8", "--keys", "100", "--timeout", "2s")...)
		checkReport(t, rep)
		if rep.Mode != "reserve" || rep.PlainDecisionsPerSecond <= 0 || rep.Errors != 0 || rep.Rejected != 0 {
			t.Fatalf("%v: %+v", store, rep)
		}
		if r := rep.DecisionsPerSecond / rep.PlainDecisionsPerSecond; r != rep.ReserveRatio {
			t.Fatalf("%v: ratio %g, want %g", store, rep.ReserveRatio, r)
		}
		if !strings.Contains(stderr, "reserve+commit pairs of 5") {
			t.Fatalf("stderr does not say what runs:\n%s", stderr)
		}
	}
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"bench", "--mode", "reserve", "--duration", "300ms", "--concurrency", "2"}, nil, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	for _, want := range []string{"plain ", "decisions/s", "reserve+commit pairs/s", "× the plain decisions", "p99"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, stdout.String())
		}
	}
}

func TestBenchReserveModeRejectsBadFlagValuesNamingTheFlag(t *testing.T) {
	for _, args := range [][]string{
		{"--mode", "commit"},
		{"--mode", "reserve", "--estimate", "0"},
		{"--mode", "reserve", "--limit", "10/s", "--estimate", "11"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), append([]string{"bench"}, args...), nil, &stdout, &stderr)
		if code != exitUsage || !strings.Contains(stderr.String(), args[len(args)-2]) {
			t.Fatalf("%v: exit %d, stderr:\n%s", args, code, stderr.String())
		}
	}
}
