package limiter_test

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

func TestTheTableHasOneSpecPerAlgorithmInOrder(t *testing.T) {
	all := limiter.AllAlgorithms()
	specs := limiter.AlgorithmSpecs()
	if len(all) != limiter.NumAlgorithms || len(specs) != limiter.NumAlgorithms {
		t.Fatalf("%d algorithms, %d specs, want %d of each", len(all), len(specs), limiter.NumAlgorithms)
	}
	for i, a := range all {
		spec := limiter.SpecOf(a)
		if spec == nil || spec != specs[i] || spec.Index() != i || spec.Algorithm() != a {
			t.Errorf("algorithm %d (%s): spec %v, want the table's row %d naming it", i, a, spec, i)
		}
		if got, err := limiter.ParseAlgorithm(string(a)); err != nil || got != a {
			t.Errorf("ParseAlgorithm(%q) = %q, %v", a, got, err)
		}
		if spec.NumKeys() < 1 || spec.KeySuffixes()[0] != "" {
			t.Errorf("%s: key suffixes %q, want the base key first", a, spec.KeySuffixes())
		}
	}
	if limiter.SpecOf("nope") != nil {
		t.Error("SpecOf of an unknown name is not nil")
	}
}

func TestAllAlgorithmsAndAllStatusesAreTheCallersOwn(t *testing.T) {
	a := limiter.AllAlgorithms()
	a[0] = "changed"
	if limiter.AllAlgorithms()[0] != limiter.FixedWindow {
		t.Error("changing AllAlgorithms' slice changed the next one")
	}
	s := limiter.AllStatuses()
	if len(s) != limiter.NumStatuses || slices.Contains(s, limiter.StatusCanceled) {
		t.Errorf("AllStatuses = %v, want %d statuses without canceled", s, limiter.NumStatuses)
	}
	s[0] = "changed"
	if limiter.AllStatuses()[0] != limiter.StatusAllowed {
		t.Error("changing AllStatuses' slice changed the next one")
	}
}

func TestBucketAlgorithmsAreThoseWhoseQuotaIsTheBurst(t *testing.T) {
	for _, spec := range limiter.AlgorithmSpecs() {
		lim := limiter.Limit{Algorithm: spec.Algorithm(), Rate: 10, Period: time.Second, Burst: 3}
		want := int64(10)
		if spec.Bucket() {
			want = 3
		}
		if lim.Quota() != want || spec.Algorithm().IsBucket() != spec.Bucket() {
			t.Errorf("%s: quota %d, IsBucket %v; want %d", spec, lim.Quota(), spec.Algorithm().IsBucket(), want)
		}
	}
}

func TestParamsAreTheScriptArgumentsOfEachAlgorithm(t *testing.T) {
	lim := limiter.Limit{Rate: 10, Period: 2 * time.Second, Burst: 4, NoDelay: true}
	offset := int64(limiter.WindowOffset("k", lim.Period) / time.Microsecond)
	want := map[limiter.Algorithm][]int64{
		limiter.FixedWindow:   {10, 2_000_000, offset, 0, 0, 0, 0},
		limiter.SlidingWindow: {10, 2_000_000, offset},
		limiter.SlidingLog:    {10, 2_000_000},
		limiter.TokenBucket:   {4, 10, 2_000_000},
		limiter.GCRA:          {4, 10, 2_000_000},
		limiter.LeakyBucket:   {4, 10, 2_000_000, 1},
	}
	for a, w := range want {
		lim.Algorithm = a
		spec := limiter.SpecOf(a)
		if got := spec.AppendParams(nil, "k", lim); !slices.Equal(got, w) || spec.NumParams() != len(w) {
			t.Errorf("%s: params %v (%v), want %v", a, got, spec.Params(), w)
		}
		if spec.Staggered() != (a == limiter.FixedWindow || a == limiter.SlidingWindow) {
			t.Errorf("%s: Staggered = %v", a, spec.Staggered())
		}
	}
	lim.Algorithm, lim.AlignWindows = limiter.FixedWindow, true
	if got := limiter.SpecOf(limiter.FixedWindow).AppendParams(nil, "k", lim); got[2] != 0 {
		t.Errorf("an aligned window has offset %d, want 0", got[2])
	}
	// A calendar's windows are its zone's: no offset, the starts around now.
	cal := limiter.PerCalendar(10, &limiter.Calendar{Unit: limiter.Month})
	at := time.Date(2028, time.February, 10, 0, 0, 0, 0, time.UTC)
	month := func(m time.Month) int64 { return time.Date(2028, m, 1, 0, 0, 0, 0, time.UTC).UnixMicro() }
	calWant := []int64{10, int64(limiter.Month.Longest() / time.Microsecond), 0, month(1), month(2), month(3), month(4)}
	if got := limiter.SpecOf(limiter.FixedWindow).AppendParamsAt(nil, "k", cal, at); !slices.Equal(got, calWant) {
		t.Errorf("a calendar month's params %v, want %v", got, calWant)
	}
}

// TestThePackageDocTableIsTheAlgorithmTable reads the table of state per
// key in doc.go: each row's state and Redis columns (continued on the
// lines below it) must be its algorithm's State and RedisState.
func TestThePackageDocTableIsTheAlgorithmTable(t *testing.T) {
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	const stateCol, memoryCol, redisCol = 16, 41, 71 // rune columns after "//\t"
	cell := func(r []rune, from, to int) string {
		if from >= len(r) {
			return ""
		}
		return strings.TrimSpace(string(r[from:min(to, len(r))]))
	}
	state, redis := map[string]string{}, map[string]string{}
	var current string
	inTable := false
	for _, line := range strings.Split(string(src), "\n") {
		row, ok := strings.CutPrefix(line, "//\t")
		if !ok {
			inTable = false
			continue
		}
		r := []rune(row)
		if strings.HasPrefix(row, "algorithm       state per key") {
			inTable = true
			continue
		}
		if !inTable {
			continue
		}
		if name := cell(r, 0, stateCol); name != "" {
			current = name
		}
		state[current] = strings.TrimSpace(state[current] + " " + cell(r, stateCol, memoryCol))
		redis[current] = strings.TrimSpace(redis[current] + " " + cell(r, redisCol, len(r)))
	}
	for _, spec := range limiter.AlgorithmSpecs() {
		name := string(spec.Algorithm())
		if state[name] != spec.State() || redis[name] != spec.RedisState() {
			t.Errorf("%s: doc.go says state %q, Redis %q; the table says %q, %q", name, state[name], redis[name], spec.State(), spec.RedisState())
		}
	}
	if len(state) != limiter.NumAlgorithms {
		t.Errorf("doc.go's table has rows %v, want one per algorithm", state)
	}
}

func TestOnlySlidingWindowIsApproximateAndOnlyLeakyBucketDelays(t *testing.T) {
	for _, spec := range limiter.AlgorithmSpecs() {
		a := spec.Algorithm()
		if spec.Exact() != (a != limiter.SlidingWindow) || spec.Delays() != (a == limiter.LeakyBucket) {
			t.Errorf("%s: Exact %v, Delays %v", a, spec.Exact(), spec.Delays())
		}
	}
}
