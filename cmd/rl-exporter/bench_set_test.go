package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/rl-exporter/rl-exporter/internal/redistest"
)

func TestBenchLimitsDecidesSeveralLimitsAsOneBesideOneLimitAndPrintsTheRatio(t *testing.T) {
	srv := redistest.Single(t)
	for _, store := range [][]string{{"--store", "memory"}, {"--store", "redis", "--redis-url", srv.URL()}} {
		rep, stderr := benchJSON(t, append(store, "--limits", "3", "--orgs", "10", "--algorithm", "sliding_window",
			"--duration", "300ms", "--concurrency", "8", "--keys", "100", "--timeout", "2s")...)
		checkReport(t, rep)
		if rep.Limits != 3 || rep.PlainDecisionsPerSecond <= 0 || rep.Errors != 0 || rep.Rejected != 0 || rep.SetScope != "" {
			t.Fatalf("%v: %+v", store, rep)
		}
		if r := rep.DecisionsPerSecond / rep.PlainDecisionsPerSecond; r != rep.SetRatio {
			t.Fatalf("%v: ratio %g, want %g", store, rep.SetRatio, r)
		}
		if rep.ClientCPUPerSetSeconds <= 0 || rep.ClientCPUPerPlainSeconds <= 0 {
			t.Fatalf("%v: client CPU a request %g, a single decision %g", store, rep.ClientCPUPerSetSeconds, rep.ClientCPUPerPlainSeconds)
		}
		if redis := store[1] == "redis"; redis != (rep.RedisCPUPerSetSeconds > 0 && rep.RedisCPUPerPlainSeconds > 0) {
			t.Fatalf("%v: Redis CPU a request %g, a single decision %g", store, rep.RedisCPUPerSetSeconds, rep.RedisCPUPerPlainSeconds)
		}
		for _, want := range []string{"sets of 3 as one", "sliding_window", "token_bucket", "calendar month", "per organisation (10)", "in 3 turns each"} {
			if !strings.Contains(stderr, want) {
				t.Fatalf("stderr does not say what runs (%q):\n%s", want, stderr)
			}
		}
	}
	var stdout, stderr bytes.Buffer
	args := []string{"bench", "--limits", "2", "--store", "redis", "--redis-url", srv.URL(), "--duration", "200ms", "--concurrency", "2"}
	if code := run(context.Background(), args, nil, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	for _, want := range []string{"one limit ", "decisions/s", "2 limits ", "requests/s", "× one limit", "redis cpu ", "a request of 2 limits", "p99"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, stdout.String())
		}
	}
}

func TestBenchLimitsOnAClusterSaysWhetherTheSetSpansSlots(t *testing.T) {
	cl := redistest.Cluster(t, 3)
	for _, c := range []struct{ orgs, scope string }{{"0", "same-slot"}, {"10", "cross-slot"}} {
		rep, _ := benchJSON(t, "--store", "redis", "--cluster-addrs", strings.Join(cl.Addrs, ","), "--limits", "3", "--orgs", c.orgs,
			"--duration", "300ms", "--concurrency", "8", "--keys", "100", "--timeout", "2s")
		checkReport(t, rep)
		if rep.SetScope != c.scope || rep.Errors != 0 || rep.Rejected != 0 || rep.RedisCPUPerSetSeconds <= 0 {
			t.Fatalf("--orgs %s: want %s without errors: %+v", c.orgs, c.scope, rep)
		}
	}
}

func TestBenchLimitsRejectsBadFlagValuesNamingTheFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		flag string
	}{
		{[]string{"--limits", "0"}, "--limits"},
		{[]string{"--limits", "4"}, "--limits"},
		{[]string{"--limits", "2", "--mode", "reserve"}, "--limits"},
		{[]string{"--limits", "3", "--orgs", "-1"}, "--orgs"},
		{[]string{"--limits", "3", "--orgs", "0", "--algorithm", "fixed_window"}, "--orgs"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), append([]string{"bench"}, c.args...), nil, &stdout, &stderr)
		if code != exitUsage || !strings.Contains(stderr.String(), c.flag) {
			t.Fatalf("%v: exit %d, stderr:\n%s", c.args, code, stderr.String())
		}
	}
}

func TestBenchLimitsBesideATokenBucketTakesTheCostFromAnotherAlgorithm(t *testing.T) {
	rep, stderr := benchJSON(t, "--limits", "2", "--algorithm", "token_bucket", "--duration", "300ms", "--concurrency", "2", "--keys", "10")
	checkReport(t, rep)
	if rep.Errors != 0 || !strings.Contains(stderr, "gcra") {
		t.Fatalf("errors %d (%s), stderr:\n%s", rep.Errors, rep.FirstError, stderr)
	}
}
