package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestServeGRPCListenFlagTurnsTheGRPCListenerOn(t *testing.T) {
	t.Run("without rls.config_dir it is refused, naming the key", func(t *testing.T) {
		var stderr bytes.Buffer
		code := run(context.Background(), []string{"serve", "--listen", "127.0.0.1:0", "--grpc-listen", "127.0.0.1:0"}, nil, &bytes.Buffer{}, &stderr)
		if code == exitOK || !strings.Contains(stderr.String(), "rls.config_dir") {
			t.Fatalf("exit %d, stderr %q; want a failure naming rls.config_dir", code, stderr.String())
		}
	})
	t.Run("with a domain directory it serves the gRPC listener", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "d.yaml"), []byte("domain: d\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		var stderr bytes.Buffer
		code := run(ctx, []string{"serve", "--listen", "127.0.0.1:0", "--grpc-listen", "127.0.0.1:0"},
			environ{"RL_RLS__CONFIG_DIR=" + dir}, &bytes.Buffer{}, &stderr)
		if code != exitOK || !strings.Contains(stderr.String(), "listener=grpc") {
			t.Fatalf("exit %d, stderr %q; want the grpc listener started and a clean stop", code, stderr.String())
		}
	})
}

func TestCheckReportsAnInvalidRLSDomainFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "d.yaml"), []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "rl.yaml")
	if err := os.WriteFile(conf, []byte("server: {grpc_listen: \"127.0.0.1:0\"}\nrls: {config_dir: .}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"check", "--config", conf}, nil, &stdout, &stderr)
	if code == exitOK || !strings.Contains(stderr.String(), "d.yaml") || !strings.Contains(stderr.String(), "d.k: rate_limit: unit") {
		t.Fatalf("exit %d, stderr %q; want the domain file and descriptor named", code, stderr.String())
	}
}

func TestCheckNamesTheRulesTheQuotaServiceRefuses(t *testing.T) {
	dir := t.TempDir()
	domain := "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 100, algorithm: token_bucket, charge_on_stream_done: true}\n"
	if err := os.WriteFile(filepath.Join(dir, "d.yaml"), []byte(domain), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, enabled := range []bool{false, true} {
		conf := filepath.Join(t.TempDir(), "rl.yaml")
		body := fmt.Sprintf("server: {grpc_listen: \"127.0.0.1:0\"}\nrls: {config_dir: %q}\nrlqs: {enabled: %v}\n", dir, enabled)
		if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), []string{"check", "--config", conf}, nil, &stdout, &stderr)
		if !enabled {
			if code != exitOK {
				t.Fatalf("rlqs off: exit %d, stderr %q; the rate limit service takes the rule", code, stderr.String())
			}
			continue
		}
		if code == exitOK || !strings.Contains(stderr.String(), "d.yaml: d.k: charge_on_stream_done") {
			t.Fatalf("rlqs on: exit %d, stderr %q; want the file and rule refused named", code, stderr.String())
		}
	}
}
