package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/loadgen"
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
		if rep.PairRatio != rep.ReserveRatio || rep.ClientCPUPerPairSeconds <= 0 || rep.ClientCPUPerPlainSeconds <= 0 {
			t.Fatalf("%v: pair ratio %g, client CPU a pair %g and a plain decision %g", store, rep.PairRatio, rep.ClientCPUPerPairSeconds, rep.ClientCPUPerPlainSeconds)
		}
		if redis := store[1] == "redis"; redis != (rep.RedisCPUPerPairSeconds > 0 && rep.RedisCPUPerPlainSeconds > 0) {
			t.Fatalf("%v: Redis CPU a pair %g, a plain decision %g", store, rep.RedisCPUPerPairSeconds, rep.RedisCPUPerPlainSeconds)
		}
		if !strings.Contains(stderr, "reserve+commit pairs of 5") || !strings.Contains(stderr, "in 3 turns each") {
			t.Fatalf("stderr does not say what runs:\n%s", stderr)
		}
	}
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"bench", "--mode", "reserve", "--duration", "300ms", "--concurrency", "2"}, nil, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	for _, want := range []string{"plain ", "decisions/s", "reserve+commit pairs/s", "× the plain decisions", "client cpu", "p99"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, stdout.String())
		}
	}
}

func TestBenchLeaseModeReportsPairsBesideInterleavedPlainDecisionsWithRedisCPU(t *testing.T) {
	srv := redistest.Single(t)
	for _, store := range [][]string{{"--store", "memory"}, {"--store", "redis", "--redis-url", srv.URL()}} {
		rep, stderr := benchJSON(t, append(store, "--mode", "lease", "--duration", "300ms", "--concurrency", "8",
			"--keys", "100", "--timeout", "2s")...)
		checkReport(t, rep)
		if rep.Mode != "lease" || rep.PlainDecisionsPerSecond <= 0 || rep.Errors != 0 || rep.Rejected != 0 || rep.ReserveRatio != 0 {
			t.Fatalf("%v: %+v", store, rep)
		}
		if r := rep.DecisionsPerSecond / rep.PlainDecisionsPerSecond; r != rep.PairRatio {
			t.Fatalf("%v: ratio %g, want %g", store, rep.PairRatio, r)
		}
		if redis := store[1] == "redis"; redis != (rep.RedisCPUPerPairSeconds > 0 && rep.RedisCPUPerPlainSeconds > 0) {
			t.Fatalf("%v: Redis CPU a pair %g, a plain decision %g", store, rep.RedisCPUPerPairSeconds, rep.RedisCPUPerPlainSeconds)
		}
		if !strings.Contains(stderr, "lease acquire+release pairs, in 3 turns each") {
			t.Fatalf("stderr does not say what runs:\n%s", stderr)
		}
	}
	var stdout, stderr bytes.Buffer
	args := []string{"bench", "--mode", "lease", "--store", "redis", "--redis-url", srv.URL(), "--duration", "200ms", "--concurrency", "2"}
	if code := run(context.Background(), args, nil, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	for _, want := range []string{"plain ", "lease acquire+release pairs/s", "× the plain decisions", "redis cpu ", "a plain decision", "p99"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, stdout.String())
		}
	}
}

func TestParseInfoCPUAddsSystemAndUserTime(t *testing.T) {
	got, err := parseInfoCPU("# CPU\r\nused_cpu_sys:1.250000\r\nused_cpu_user:0.750000\r\nused_cpu_sys_children:9.0\r\n")
	if err != nil || got != 2*time.Second {
		t.Fatalf("got %s, %v; want 2s", got, err)
	}
	if _, err := parseInfoCPU("# CPU\r\nused_cpu_sys:1.0\r\n"); err == nil {
		t.Fatal("a reply without used_cpu_user parsed")
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

// TestAPairCountsOnceItsSettleIsAnswered: a turn's callers are done, but
// its pairs count only once their settles are answered, a failed one as
// an error, and the wait for them is part of the turn.
func TestAPairCountsOnceItsSettleIsAnswered(t *testing.T) {
	acks := new(settleAcks)
	for range 3 {
		acks.sent()
	}
	acks.answered(nil)
	acks.answered(nil)
	go acks.answered(errors.New("lost")) // still on its way when the callers are done
	callersDone := time.Now().Add(-20 * time.Millisecond)
	res := acks.settle(loadgen.Result{Elapsed: time.Second, Decisions: 4, Allowed: 3, Rejected: 1}, callersDone)
	if res.Allowed != 2 || res.Errors != 1 || res.Rejected != 1 || res.Decisions != 4 || res.FirstError == nil {
		t.Fatalf("3 settles sent, 2 answered, 1 failed, 1 rejected reserve: %+v", res)
	}
	if res.Elapsed < time.Second+20*time.Millisecond {
		t.Fatalf("elapsed %s does not include the wait for the last settle", res.Elapsed)
	}
}
