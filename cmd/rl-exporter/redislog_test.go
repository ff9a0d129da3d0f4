package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestTheRedisClientsLinesAreJSONAndSummarised(t *testing.T) {
	var out bytes.Buffer
	now := time.Unix(1_700_000_000, 0)
	l := newRedisLog(slog.New(slog.NewJSONHandler(&out, nil)), 10*time.Second)
	l.now = func() time.Time { return now }
	for i := 0; i < 1000; i++ {
		if i == 600 {
			now = now.Add(10 * time.Second)
		}
		l.Printf(context.Background(), "redis: connection pool: failed to dial after %d attempts: %v", 1, "connect: connection refused")
	}
	l.Printf(context.Background(), "sentinel: new master=%q addr=%q", "mymaster", "127.0.0.1:7000")
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("1000 identical lines over 10s and one other: %d lines written, want 3:\n%s", len(lines), out.String())
	}
	var first, second map[string]any
	for i, v := range []*map[string]any{&first, &second} {
		if err := json.Unmarshal([]byte(lines[i]), v); err != nil {
			t.Fatalf("line %q is not JSON: %v", lines[i], err)
		}
	}
	if first["component"] != "redis-client" || first["level"] != "WARN" || !strings.HasPrefix(first["msg"].(string), "connection pool: failed to dial") {
		t.Errorf("first line %v: want a WARN from component redis-client with the client's message", first)
	}
	if second["repeated"] != float64(599) {
		t.Errorf("second line %v: want repeated=599 (the lines left out since the first)", second)
	}
}
