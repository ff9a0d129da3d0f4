package collector_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rl-exporter/rl-exporter/collector"
)

const sharesExposition = `
# HELP rate_limit_shares_give_back_errors_total Give-backs of local shares' chunks that Redis did not acknowledge: the chunk's reservation expires charged, its unused units lost for the window.
# TYPE rate_limit_shares_give_back_errors_total counter
rate_limit_shares_give_back_errors_total 2
# HELP rate_limit_shares_give_backs_total Chunks of the local shares given back to Redis at what was used of them, failed ones included.
# TYPE rate_limit_shares_give_backs_total counter
rate_limit_shares_give_backs_total 40
# HELP rate_limit_shares_plain_decisions_total Decisions of classes with shares made on Redis, one round trip each, because the key asked too little to be worth a chunk.
# TYPE rate_limit_shares_plain_decisions_total counter
rate_limit_shares_plain_decisions_total 7
# HELP rate_limit_shares_reservations_total Chunks of a limit's units this instance asked Redis to reserve for its local shares (shares.enabled), granted, refused or failed.
# TYPE rate_limit_shares_reservations_total counter
rate_limit_shares_reservations_total 42
# HELP rate_limit_shares_units_total Units of the local shares' chunks: kind=taken, granted by Redis; kind=returned, given back unused (those of failed give-backs included).
# TYPE rate_limit_shares_units_total counter
rate_limit_shares_units_total{kind="returned"} 96
rate_limit_shares_units_total{kind="taken"} 1000
`

func TestSharesExportsChunksUnitsGiveBackErrorsAndPlainDecisions(t *testing.T) {
	st := collector.SharesStats{Reservations: 42, UnitsTaken: 1000, UnitsReturned: 96, GiveBacks: 40, GiveBackErrors: 2, Plain: 7}
	s, err := collector.NewShares(collector.SharesConfig{Stats: func() (collector.SharesStats, bool) { return st, true }})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(s)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(sharesExposition)); err != nil {
		t.Fatal(err)
	}
	if problems, err := testutil.CollectAndLint(s); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", err, problems)
	}
	if _, err := collector.NewShares(collector.SharesConfig{}); err == nil {
		t.Error("a Shares without Stats was made")
	}
}

// Until a class has shares nothing is exported; from then on every series is there, at zero
// before the first chunk, read afresh at each scrape.
func TestSharesExportNothingUntilAClassHasSharesThenEverySeriesFromZero(t *testing.T) {
	var on atomic.Bool
	var st atomic.Pointer[collector.SharesStats]
	st.Store(&collector.SharesStats{})
	s, err := collector.NewShares(collector.SharesConfig{Stats: func() (collector.SharesStats, bool) { return *st.Load(), on.Load() }})
	if err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(s); n != 0 {
		t.Fatalf("with no class with shares %d series were collected, want none", n)
	}
	on.Store(true)
	wantErrors := func(n int) string {
		return fmt.Sprintf(`
# HELP rate_limit_shares_give_back_errors_total Give-backs of local shares' chunks that Redis did not acknowledge: the chunk's reservation expires charged, its unused units lost for the window.
# TYPE rate_limit_shares_give_back_errors_total counter
rate_limit_shares_give_back_errors_total %d
`, n)
	}
	if n := testutil.CollectAndCount(s); n != 6 {
		t.Fatalf("%d series collected, want 6", n)
	}
	if err := testutil.CollectAndCompare(s, strings.NewReader(wantErrors(0)), "rate_limit_shares_give_back_errors_total"); err != nil {
		t.Error(err)
	}
	st.Store(&collector.SharesStats{GiveBacks: 3, GiveBackErrors: 1})
	if err := testutil.CollectAndCompare(s, strings.NewReader(wantErrors(1)), "rate_limit_shares_give_back_errors_total"); err != nil {
		t.Error(err)
	}
}
