package docs

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/config"
	"github.com/rl-exporter/rl-exporter/limiter"
)

// TestTheGatewayGuidesSixthRequestIsRefusedAtAnySecond holds the limit of
// examples/forward-auth.yaml to what docs/gateways.md shows its six
// requests from one client get, 200 200 200 200 200 429, whenever they
// are sent: from every start across the limit's period, a tenth of a
// second apart, six requests spaced by a second (a loaded machine's
// curls, and more) refuse the sixth alone. A limit that starts a fresh
// window among them (fixed_window) would let the sixth through, the page
// showing what a reader then does not see.
func TestTheGatewayGuidesSixthRequestIsRefusedAtAnySecond(t *testing.T) {
	cfg, err := config.Load(filepath.Join(root, "examples", "forward-auth.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	lim := cfg.TierLimit("default", "default").Limiter()
	const gap = time.Second
	base := time.Unix(1_800_000_000, 0)
	for start := time.Duration(0); start < lim.Period; start += 100 * time.Millisecond {
		now := base.Add(start)
		store := limiter.NewMemoryStore(limiter.MemoryConfig{Now: func() time.Time { return now }})
		l, err := limiter.New(limiter.Config{Limit: lim, Store: store})
		if err != nil {
			t.Fatal(err)
		}
		var codes []string
		for range 6 {
			d, err := l.Allow(context.Background(), "ip:127.0.0.1")
			if err != nil {
				t.Fatal(err)
			}
			codes = append(codes, map[bool]string{true: "200", false: "429"}[d.Allowed])
			now = now.Add(gap)
		}
		if got := strings.Join(codes, " "); got != "200 200 200 200 200 429" {
			t.Fatalf("six requests %s apart from %s into the period: %s; docs/gateways.md shows 200 200 200 200 200 429 (%s)",
				gap, start, got, lim.Algorithm)
		}
	}
}
