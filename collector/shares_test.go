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
# HELP rate_limit_shares_give_back_errors_total Give-backs of local shares' chunks that Redis did not acknowledge, by class: the chunk's reservation expires charged, its unused units lost for the window.
# TYPE rate_limit_shares_give_back_errors_total counter
rate_limit_shares_give_back_errors_total{class="api"} 2
rate_limit_shares_give_back_errors_total{class="search"} 0
# HELP rate_limit_shares_give_backs_total Chunks of the local shares given back to Redis at what was used of them, by class, failed ones included.
# TYPE rate_limit_shares_give_backs_total counter
rate_limit_shares_give_backs_total{class="api"} 40
rate_limit_shares_give_backs_total{class="search"} 5
# HELP rate_limit_shares_plain_decisions_total Decisions of classes with shares made on Redis, one round trip each, by class, because the key asked too little to be worth a chunk.
# TYPE rate_limit_shares_plain_decisions_total counter
rate_limit_shares_plain_decisions_total{class="api"} 7
rate_limit_shares_plain_decisions_total{class="search"} 30
# HELP rate_limit_shares_reservations_total Chunks of a limit's units this instance asked Redis to reserve for its local shares (shares.enabled), by class, granted, refused or failed.
# TYPE rate_limit_shares_reservations_total counter
rate_limit_shares_reservations_total{class="api"} 42
rate_limit_shares_reservations_total{class="search"} 6
# HELP rate_limit_shares_units_total Units of the local shares' chunks, by class: kind=taken, granted by Redis; kind=returned, given back unused (those of failed give-backs included).
# TYPE rate_limit_shares_units_total counter
rate_limit_shares_units_total{class="api",kind="returned"} 96
rate_limit_shares_units_total{class="api",kind="taken"} 1000
rate_limit_shares_units_total{class="search",kind="returned"} 3
rate_limit_shares_units_total{class="search",kind="taken"} 48
`

func TestSharesExportChunksUnitsGiveBackErrorsAndPlainDecisionsByClass(t *testing.T) {
	st := map[string]collector.SharesStats{
		"api":    {Reservations: 42, UnitsTaken: 1000, UnitsReturned: 96, GiveBacks: 40, GiveBackErrors: 2, Plain: 7},
		"search": {Reservations: 6, UnitsTaken: 48, UnitsReturned: 3, GiveBacks: 5, Plain: 30},
	}
	s, err := collector.NewShares(collector.SharesConfig{Stats: func() map[string]collector.SharesStats { return st }})
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

// Until a class has shares nothing is exported; from then on every series of each class with
// shares is there, at zero before its first chunk, read afresh at each scrape; a class Stats
// no longer lists (a reload took its shares away) goes, one it lists anew comes.
func TestSharesExportNothingUntilAClassHasSharesThenEachClassFromZero(t *testing.T) {
	var st atomic.Pointer[map[string]collector.SharesStats]
	set := func(m map[string]collector.SharesStats) { st.Store(&m) }
	set(nil)
	s, err := collector.NewShares(collector.SharesConfig{Stats: func() map[string]collector.SharesStats { return *st.Load() }})
	if err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(s); n != 0 {
		t.Fatalf("with no class with shares %d series were collected, want none", n)
	}
	wantErrors := func(byClass ...any) string {
		out := `
# HELP rate_limit_shares_give_back_errors_total Give-backs of local shares' chunks that Redis did not acknowledge, by class: the chunk's reservation expires charged, its unused units lost for the window.
# TYPE rate_limit_shares_give_back_errors_total counter
`
		for i := 0; i < len(byClass); i += 2 {
			out += fmt.Sprintf("rate_limit_shares_give_back_errors_total{class=%q} %d\n", byClass[i], byClass[i+1])
		}
		return out
	}
	set(map[string]collector.SharesStats{"api": {}})
	if n := testutil.CollectAndCount(s); n != 6 {
		t.Fatalf("%d series collected for one class, want 6", n)
	}
	if err := testutil.CollectAndCompare(s, strings.NewReader(wantErrors("api", 0)), "rate_limit_shares_give_back_errors_total"); err != nil {
		t.Error(err)
	}
	set(map[string]collector.SharesStats{"api": {GiveBacks: 3, GiveBackErrors: 1}, "search": {}})
	if err := testutil.CollectAndCompare(s, strings.NewReader(wantErrors("api", 1, "search", 0)), "rate_limit_shares_give_back_errors_total"); err != nil {
		t.Error(err)
	}
	set(map[string]collector.SharesStats{"search": {GiveBacks: 1}})
	if n := testutil.CollectAndCount(s); n != 6 {
		t.Fatalf("%d series collected once api lost its shares, want search's 6", n)
	}
	if err := testutil.CollectAndCompare(s, strings.NewReader(wantErrors("search", 0)), "rate_limit_shares_give_back_errors_total"); err != nil {
		t.Error(err)
	}
}
