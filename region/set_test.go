package region_test

import (
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/rl-exporter/rl-exporter/region"
)

// newSetOnly makes a Set whose clients point at nothing (New does not
// contact Redis): for what needs no Redis.
func newSetOnly(t *testing.T, local string, names ...string) *region.Set {
	t.Helper()
	clients := map[string]redis.UniversalClient{}
	for _, n := range names {
		c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
		t.Cleanup(func() { _ = c.Close() })
		clients[n] = c
	}
	s, err := region.New(region.Config{Local: local, Clients: clients})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestNewRefusesAConfigWithoutItsLocalRegion(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	tests := []struct {
		name string
		cfg  region.Config
		want string
	}{
		{"no local name", region.Config{Clients: map[string]redis.UniversalClient{"a": c}}, "Local"},
		{"no client for the local region", region.Config{Local: "b", Clients: map[string]redis.UniversalClient{"a": c}}, `"b"`},
		{"a nil client", region.Config{Local: "a", Clients: map[string]redis.UniversalClient{"a": c, "b": nil}}, `"b"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := region.New(tt.cfg)
			if err == nil {
				_ = s.Close()
				t.Fatal("New accepted it")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q does not name %s", err, tt.want)
			}
		})
	}
}

func TestStoreRefusesAnUnknownHomeOrModeOrThreshold(t *testing.T) {
	s := newSetOnly(t, "a", "a", "b")
	if _, err := s.Store(region.ModeStrict, region.StoreOptions{Home: "c"}); err == nil || !strings.Contains(err.Error(), `"c"`) {
		t.Errorf("a pinned home that is no region: %v", err)
	}
	if _, err := s.Store("global", region.StoreOptions{}); err == nil || !strings.Contains(err.Error(), "global") {
		t.Errorf("an unknown mode: %v", err)
	}
	if _, err := s.Store(region.ModeHybrid, region.StoreOptions{HybridThreshold: 1.5}); err == nil {
		t.Error("a threshold above 1 was accepted")
	}
}
