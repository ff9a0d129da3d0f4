package summarylog_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/summarylog"
)

// lines decodes the JSON lines of buf.
func lines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

// A line made at WARN writes at WARN; LogSum's line adds up the amounts of the occurrences it
// counts, the first at once, the ones held back in the next line.
func TestALineAtWarnSumsTheAmountsOfTheOccurrencesItCounts(t *testing.T) {
	var buf bytes.Buffer
	now := time.Unix(1_000_000, 0)
	l := summarylog.NewAt(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn})), slog.LevelWarn,
		10*time.Second, func() time.Time { return now })
	ctx := context.Background()
	for _, n := range []int64{7, 3, 5} {
		l.LogSum(ctx, "lost", nil, "units", n)
	}
	now = now.Add(10 * time.Second)
	l.LogSum(ctx, "lost", nil, "units", 2)
	got := lines(t, &buf)
	if len(got) != 2 {
		t.Fatalf("%d lines, want 2: %v", len(got), got)
	}
	for i, want := range []struct{ occurrences, units float64 }{{1, 7}, {3, 10}} {
		if got[i]["level"] != "WARN" || got[i]["occurrences"] != want.occurrences || got[i]["units"] != want.units {
			t.Errorf("line %d: %v, want level WARN, occurrences %v, units %v", i, got[i], want.occurrences, want.units)
		}
	}
	// A logger that writes no warnings counts nothing.
	buf.Reset()
	quiet := summarylog.NewAt(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelError})), slog.LevelWarn, time.Second, nil)
	quiet.LogSum(ctx, "lost", nil, "units", 1)
	if buf.Len() != 0 {
		t.Errorf("a logger above WARN wrote %q", buf.String())
	}
}
