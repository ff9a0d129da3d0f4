package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const overloadClasses = `
tiers: {names: [free, enterprise], default: free}
classes:
  default:
    priority: sheddable
    limits:
      free: {algorithm: fixed_window, rate: 100, period: 1m}
      enterprise: {algorithm: fixed_window, rate: 100, period: 1m, priority: critical}
`

func TestCheckExplainsOverloadAndItsTargetFromTheSLOSpec(t *testing.T) {
	f := writeConfig(t, "server: {upstream: \"http://127.0.0.1:9\", overload: {enabled: true, slo_spec: slo.yaml}}\n"+overloadClasses)
	if err := os.WriteFile(filepath.Join(filepath.Dir(f), "slo.yaml"), []byte("overload: {latency_threshold: 250ms}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if got := run(context.Background(), []string{"check", "--config", f}, nil, &out, &errb); got != exitOK {
		t.Fatalf("exit %d; stderr %s", got, errb.String())
	}
	for _, want := range []string{
		"overload on for http://127.0.0.1:9: target p99 ≤ 250ms (from " + filepath.Join(filepath.Dir(f), "slo.yaml") + ")",
		"limit starts at 20 within [20, 1000]",
		"critical the limit, default 80% of it, sheddable 64%",
		"a critical request waits up to 100ms for a slot at the limit; shed requests get 503 with Retry-After 1s",
		"  critical: default/enterprise\n",
		"  sheddable: default/free\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestCheckSaysPrioritiesShedNothingWithOverloadOff(t *testing.T) {
	f := writeConfig(t, overloadClasses)
	var out, errb bytes.Buffer
	if got := run(context.Background(), []string{"check", "--config", f}, nil, &out, &errb); got != exitOK {
		t.Fatalf("exit %d; stderr %s", got, errb.String())
	}
	if !strings.Contains(out.String(), "overload off (server.overload.enabled is false): the priorities of default/free, default/enterprise shed nothing") {
		t.Errorf("output:\n%s", out.String())
	}
}

func TestCheckRefusesAnOverloadWithoutUpstream(t *testing.T) {
	f := writeConfig(t, "server: {overload: {enabled: true}}\n"+overloadClasses)
	var out, errb bytes.Buffer
	if got := run(context.Background(), []string{"check", "--config", f}, nil, &out, &errb); got != exitFailure || !strings.Contains(errb.String(), "server.overload.enabled: needs server.upstream") {
		t.Fatalf("exit %d; stderr %s", got, errb.String())
	}
}
