//go:build !race

package rls_test

import (
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/rls"
)

// TestGoalPingsAtTheKeepaliveMinTimeAreAnswered pings a connection with no
// call in flight, as Envoy's connection keepalive does, at twice
// keepalive_min_time: every ping is answered, none is taken for a flood.
func TestGoalPingsAtTheKeepaliveMinTimeAreAnswered(t *testing.T) {
	const minTime = 100 * time.Millisecond
	h := startWith(t, rls.ServerConfig{KeepaliveMinTime: minTime, KeepalivePermitWithoutStream: true})
	fr, _ := rawConn(t, h.addr)
	tick := time.NewTicker(2 * minTime)
	defer tick.Stop()
	for i := range 6 {
		if err := fr.WritePing(false, [8]byte{byte(i)}); err != nil {
			t.Fatalf("ping %d: %v", i+1, err)
		}
		if ga := untilPingAckOrGoAway(t, fr); ga != nil {
			t.Fatalf("ping %d, %s after the last: GOAWAY %s %q, want an answer", i+1, 2*minTime, ga.ErrCode, ga.DebugData())
		}
		<-tick.C
	}
}
