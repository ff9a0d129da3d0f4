package redistest

import (
	"context"
	"testing"
	"time"
)

func TestALinkWithLatencyDelaysEachWayUntilSetToZero(t *testing.T) {
	srv := Single(t)
	link := Relay(t, srv.Addr())
	link.SetLatency(40 * time.Millisecond)
	if got := link.Latency(); got != 40*time.Millisecond {
		t.Fatalf("Latency() = %s", got)
	}
	start := time.Now()
	if r, err := Do(context.Background(), link.Addr(), "PING"); err != nil || r != "PONG" {
		t.Fatalf("PING through the link = %v, %v", r, err)
	}
	if took := time.Since(start); took < 80*time.Millisecond || took > 400*time.Millisecond {
		t.Fatalf("a PING took %s through a 40ms one-way link, want about 80ms", took)
	}
	link.SetLatency(0)
	start = time.Now()
	if _, err := Do(context.Background(), link.Addr(), "PING"); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 60*time.Millisecond {
		t.Fatalf("a PING took %s once the latency is 0", took)
	}
}
