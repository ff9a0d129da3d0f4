package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rl-exporter/rl-exporter/config"
)

const tierListConfig = `tiers: {names: [free, pro, team], default: free}
identity: {trusted_header_peers: [10.0.0.0/8]}
classes:
  chat:
    cost: 3
    limits:
      free: {algorithm: fixed_window, rate: 100, period: 1m}
      pro: [{name: rpm, algorithm: sliding_window, rate: 500, period: 1m, unit: requests}, {name: tpm, algorithm: token_bucket, rate: 200000, period: 1m, burst: 300000, shadow: true}, {name: monthly, algorithm: fixed_window, rate: 50000000, period: month, calendar: {time_zone: UTC}, scope: {header: X-Org-ID}}, {name: inflight, algorithm: concurrency, limit: 20}]
`

// check prints every limit of every tier with its name, scope and unit.
func TestCheckPrintsEveryLimitOfEveryTier(t *testing.T) {
	cfg, err := config.Parse("list.yaml", []byte(tierListConfig))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	printLimits(&out, cfg)
	want := `limits (class/tier name: limit, scope, unit):
  chat/free chat: fixed_window 100 per 1m0s, scope client, unit cost
  chat/pro rpm: sliding_window 500 per 1m0s, scope client, unit requests
  chat/pro tpm: token_bucket 200000 per 1m0s, burst 300000, scope client, unit cost, shadow true
  chat/pro monthly: fixed_window 50000000 per month in UTC, scope header X-Org-ID, unit cost
  chat/pro inflight: concurrency, 20 in flight, scope client, unit requests
  chat/team: the default tier's (free)
`
	if out.String() != want {
		t.Fatalf("check printed\n%s\nwant\n%s", out.String(), want)
	}
}

// check runs printLimits, and shows a list's calendar and concurrency
// limits by name beside the single ones.
func TestCheckShowsAListsLimitsByName(t *testing.T) {
	file := filepath.Join(t.TempDir(), "list.yaml")
	if err := os.WriteFile(file, []byte(tierListConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if got := run(context.Background(), []string{"check", "--config", file}, nil, &out, &errb); got != exitOK {
		t.Fatalf("exit %d; stderr %s", got, errb.String())
	}
	for _, want := range []string{
		"  chat/pro rpm: sliding_window 500 per 1m0s, scope client, unit requests\n",
		"  chat/pro[monthly]: fixed_window 50000000 per month in UTC; this window [",
		"  chat/pro[inflight]: concurrency, at most 20 requests in flight per key, per instance",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in:\n%s", want, out.String())
		}
	}
	if want := "warning: config " + file + ": classes.chat.limits.pro[2].scope.header: X-Org-ID is believed from identity.trusted_header_peers"; !strings.Contains(errb.String(), want) {
		t.Errorf("no %q in:\n%s", want, errb.String())
	}
}

// check refuses what a list cannot hold, naming the key.
func TestCheckRefusesWhatAListCannotHold(t *testing.T) {
	file := filepath.Join(t.TempDir(), "bad.yaml")
	bad := "store: {type: redis, redis: {url: \"redis://127.0.0.1:1\"}}\nregion: {name: a, peers: {b: {url: \"redis://127.0.0.1:2\"}}}\n" +
		strings.Replace(strings.Replace(tierListConfig, "identity: {trusted_header_peers: [10.0.0.0/8]}\n", "", 1), "unit: requests}", "unit: requests, region_mode: strict}", 1)
	if err := os.WriteFile(file, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if got := run(context.Background(), []string{"check", "--config", file}, nil, &out, &errb); got != exitFailure {
		t.Fatalf("exit %d, want %d; stdout %s", got, exitFailure, out.String())
	}
	for _, want := range []string{
		"config " + file + ": classes.chat.limits.pro[0].region_mode: strict cannot decide a list of limits as one",
		"config " + file + ": classes.chat.limits.pro[2].scope.header: X-Org-ID is believed only from identity.trusted_header_peers, which is empty",
	} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("no %q in:\n%s", want, errb.String())
		}
	}
}
