package limiter

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestPenaltyStrikesOlderThanWithinAreForgotten(t *testing.T) {
	clk := time.Unix(1_700_000_000, 0)
	s := NewMemoryStore(MemoryConfig{Now: func() time.Time { return clk }})
	ctx := context.Background()
	p := Penalty{After: 3, Within: time.Minute, For: 10 * time.Minute}
	s.Strike(ctx, "k", p, 0)
	clk = clk.Add(30 * time.Second)
	s.Strike(ctx, "k", p, 0)
	clk = clk.Add(30 * time.Second) // the first strike's minute is over
	if d, _ := s.Strike(ctx, "k", p, 0); d != 0 {
		t.Fatalf("a third strike a minute after the first boxed the key for %s: strikes outlived within", d)
	}
	s.Strike(ctx, "k", p, 0)
	if d, _ := s.Strike(ctx, "k", p, 0); d != p.For {
		t.Fatalf("three strikes within a minute: %s, want %s", d, p.For)
	}
	clk = clk.Add(p.For - time.Microsecond)
	if d, _ := s.Penalized(ctx, "k", 0); d != time.Microsecond {
		t.Errorf("a microsecond before For is over: penalized for %s, want 1µs", d)
	}
	clk = clk.Add(time.Microsecond)
	if d, _ := s.Penalized(ctx, "k", 0); d != 0 {
		t.Errorf("once For is over: penalized for %s, want 0", d)
	}
}

func TestPenaltyExpiredEntriesAreSwept(t *testing.T) {
	clk := time.Unix(1_700_000_000, 0)
	s := NewMemoryStore(MemoryConfig{Now: func() time.Time { return clk }})
	p := Penalty{After: 2, Within: time.Second, For: time.Second}
	for i := range 3 * sweepEvery {
		s.Strike(context.Background(), strings.Repeat("k", 1+i%7)+string(rune('a'+i%26))+time.Duration(i).String(), p, 0)
		clk = clk.Add(10 * time.Millisecond)
	}
	s.penalties.mu.Lock()
	n := len(s.penalties.entries)
	s.penalties.mu.Unlock()
	if n > sweepEvery+200 {
		t.Errorf("%d entries kept for keys struck once and long expired, want at most about %d", n, sweepEvery+100)
	}
}

func TestPenaltyValidateNamesTheField(t *testing.T) {
	for _, tc := range []struct {
		p    Penalty
		want string
	}{
		{Penalty{After: -1}, "after"},
		{Penalty{After: 3, For: time.Minute}, "within"},
		{Penalty{After: 3, Within: time.Minute}, "for"},
	} {
		if err := tc.p.Validate(); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error naming %s", tc.p, err, tc.want)
		}
	}
	if err := (Penalty{}).Validate(); err != nil {
		t.Errorf("the zero Penalty (off): %v", err)
	}
}
