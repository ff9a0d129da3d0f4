package quota

import (
	"context"
	"math"
	"testing"
	"time"
)

// clock is a controllable clock for the meters.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

func within(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol*want {
		t.Errorf("%s: got %.3f, want %.3f within %.0f%%", what, got, want, tol*100)
	}
}

func perSecond(lim float64) Limit { return Limit{Rate: lim, Burst: int64(lim), Period: time.Second} }

func TestDivideInProportionToDemand(t *testing.T) {
	shares := Divide(perSecond(100), []Demand{
		{Client: "d", Rate: 200, Known: true}, {Client: "a", Rate: 40, Known: true},
		{Client: "b", Rate: 40, Known: true}, {Client: "c", Rate: 40, Known: true},
	}, Config{})
	want := map[string]float64{"a": 12.5, "b": 12.5, "c": 12.5, "d": 62.5}
	total := 0.0
	for _, s := range shares {
		within(t, s.Client+" share", s.Rate, want[s.Client], 0.001)
		within(t, s.Client+" bucket rate", s.Bucket.Rate(), want[s.Client], 0.01)
		if s.Bucket.FillInterval < time.Second || s.Bucket.FillInterval%time.Second != 0 {
			t.Errorf("%s: fill interval %s, want whole seconds >= 1s", s.Client, s.Bucket.FillInterval)
		}
		total += s.Bucket.Rate()
	}
	if total > 100 {
		t.Errorf("buckets refill %.2f/s in all, more than the limit 100/s", total)
	}
	if shares[0].Client != "a" || shares[3].Client != "d" {
		t.Errorf("shares not sorted by client: %+v", shares)
	}
	if got := shares[3].Bucket.MaxTokens; got != 62 {
		t.Errorf("d's bucket holds %d tokens, want 62 (its part of the burst of 100)", got)
	}
}

func TestDivideGivesNewAndIdleClientsTheFloor(t *testing.T) {
	shares := Divide(perSecond(100), []Demand{
		{Client: "busy", Rate: 500, Known: true}, {Client: "new"}, {Client: "idle", Known: true},
	}, Config{})
	for _, s := range shares {
		if s.Client == "busy" {
			within(t, "busy", s.Rate, 90, 0.001)
			continue
		}
		within(t, s.Client, s.Rate, 5, 0.001)
	}
}

func TestDivideSplitsEvenlyWithoutDemand(t *testing.T) {
	for _, s := range Divide(perSecond(90), []Demand{{Client: "a"}, {Client: "b"}, {Client: "c"}}, Config{}) {
		within(t, s.Client, s.Rate, 30, 0.001)
	}
}

func TestDivideCapsAnInflatedDemand(t *testing.T) {
	shares := Divide(perSecond(100), []Demand{
		{Client: "honest", Rate: 100, Known: true}, {Client: "liar", Rate: 1e12, Known: true},
	}, Config{})
	// The liar's demand counts as 4 limits: it takes 400/500 of the limit, not all of it.
	within(t, "honest", shares[0].Rate, 20, 0.001)
	within(t, "liar", shares[1].Rate, 80, 0.001)
}

func TestDivideFloorNeverExceedsAnEvenSplit(t *testing.T) {
	var ds []Demand
	for i := range 40 {
		ds = append(ds, Demand{Client: string(rune('A' + i))})
	}
	total := 0.0
	for _, s := range Divide(perSecond(10), ds, Config{}) {
		total += s.Rate
	}
	within(t, "total of 40 new clients", total, 10, 0.001)
}

func TestFillIntervalStaysWithinThePeriod(t *testing.T) {
	day := Limit{Rate: 1000.0 / 86400, Burst: 1000, Period: 24 * time.Hour}
	s := Divide(day, []Demand{{Client: "a"}}, Config{})[0]
	if s.Bucket.FillInterval != 24*time.Hour || s.Bucket.TokensPerFill != 1000 {
		t.Errorf("a per-day limit of 1000 alone: bucket %+v, want 1000 tokens per 24h", s.Bucket)
	}
	fast := Divide(Limit{Rate: 10000, Burst: 10000, Period: time.Second}, []Demand{{Client: "a"}}, Config{})[0]
	if fast.Bucket.FillInterval != time.Second || fast.Bucket.TokensPerFill != 10000 {
		t.Errorf("10000/s alone: bucket %+v, want 10000 tokens per 1s", fast.Bucket)
	}
}

func TestMeterMeasuresOnTheCallersClock(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	var m Meter
	m.Report(1, c.now()) // the subscription
	if d := m.Demand("a", c.now(), time.Minute); d.Known {
		t.Fatalf("demand known after the first report: %+v", d)
	}
	c.advance(10 * time.Millisecond)
	m.Report(3, c.now()) // too close to measure: carried over
	if d := m.Demand("a", c.now(), time.Minute); d.Known {
		t.Fatalf("demand measured over 10ms: %+v", d)
	}
	c.advance(1990 * time.Millisecond)
	m.Report(77, c.now())
	within(t, "rate over 2s", m.Demand("a", c.now(), time.Minute).Rate, 40, 0.001)
	c.advance(5 * time.Second)
	m.Report(1000, c.now()) // Envoy's 5 s reports
	within(t, "rate over 5s", m.Demand("a", c.now(), time.Minute).Rate, 200, 0.001)
	c.advance(time.Minute + time.Second)
	if d := m.Demand("a", c.now(), time.Minute); !d.Known || d.Rate != 0 {
		t.Errorf("a client silent past idle: %+v, want a known demand of 0", d)
	}
}

func TestMemoryStoreExchangesAndForgets(t *testing.T) {
	var s MemoryStore
	ctx := context.Background()
	now := time.Unix(1000, 0)
	if _, err := s.Exchange(ctx, "k", []Demand{{Client: "r1/a", Rate: 5, Known: true}}, nil, now, 3*time.Second); err != nil {
		t.Fatal(err)
	}
	all, _ := s.Exchange(ctx, "k", []Demand{{Client: "r2/b", Rate: 7, Known: true}}, nil, now.Add(time.Second), 3*time.Second)
	if len(all) != 2 || all[0].Client != "r1/a" || all[1].Rate != 7 {
		t.Fatalf("both replicas' clients: %+v", all)
	}
	all, _ = s.Exchange(ctx, "k", nil, []string{"r2/b"}, now.Add(2*time.Second), 3*time.Second)
	if len(all) != 1 {
		t.Fatalf("after r2/b is gone: %+v", all)
	}
	all, _ = s.Exchange(ctx, "k", nil, nil, now.Add(5*time.Second), 3*time.Second)
	if len(all) != 0 {
		t.Fatalf("r1/a not renewed within 3s: %+v", all)
	}
}
