package traffic

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// recorder answers 429 to abusive clients and 200 to the others, and
// remembers who asked what of whom.
type recorder struct {
	name string
	mu   sync.Mutex
	seen []string // "target user tier METHOD path"
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	r.seen = append(r.seen, strings.Join([]string{r.name, req.Header.Get("X-User-ID"), req.Header.Get("X-Plan-Tier"), req.Method, req.URL.Path}, " "))
	r.mu.Unlock()
	if strings.HasPrefix(req.Header.Get("X-User-ID"), "abusive-") {
		w.WriteHeader(http.StatusTooManyRequests)
	}
}

// requests returns what the recorder has seen so far, safe to call while
// it serves.
func (r *recorder) requests() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.seen...)
}

func TestRunMixesNormalAndAbusiveClientsOverEveryTarget(t *testing.T) {
	a, b := &recorder{name: "a"}, &recorder{name: "b"}
	sa, sb := httptest.NewServer(a), httptest.NewServer(b)
	defer sa.Close()
	defer sb.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	snap, err := Run(ctx, Config{
		Targets: []string{sa.URL, sb.URL + "/"},
		Normal:  4, NormalRate: 4,
		Abusive: 1, AbusiveRate: 40,
		Tiers: []string{"free", "pro"},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ok, limited := snap.ByStatus[http.StatusOK], snap.ByStatus[http.StatusTooManyRequests]
	if ok == 0 || limited == 0 || limited < ok || snap.Sent != ok+limited+snap.Errors {
		t.Fatalf("want many 429s from the abusive client and some 200s, got %s", snap)
	}
	// The well-behaved and the abusive clients are counted apart.
	if n := snap.Normal; n.ByStatus[http.StatusOK] != ok || n.ByStatus[http.StatusTooManyRequests] != 0 {
		t.Errorf("normal clients: %s, want all %d 200s and no 429", n, ok)
	}
	if a := snap.Abusive; a.ByStatus[http.StatusTooManyRequests] != limited || a.ByStatus[http.StatusOK] != 0 {
		t.Errorf("abusive clients: %s, want all %d 429s and no 200", a, limited)
	}
	if snap.Normal.Sent+snap.Abusive.Sent != snap.Sent {
		t.Errorf("normal %d + abusive %d != total %d", snap.Normal.Sent, snap.Abusive.Sent, snap.Sent)
	}
	// Requests still in a handler when Run returned finish before the
	// servers close; only then is what they saw read.
	sa.Close()
	sb.Close()
	all := append(a.requests(), b.requests()...)
	has := func(prefix string) bool {
		for _, s := range all {
			if strings.HasPrefix(s, prefix) {
				return true
			}
		}
		return false
	}
	for _, want := range []string{
		"a normal-1 free GET /api/v1/orders/42", "b normal-1 free", "a normal-2 pro", "b abusive-1 free GET /api/v1/orders/42",
		"a normal-1 free POST /api/v1/orders", "b normal-1 free GET /internal/stats",
	} {
		if !has(want) {
			t.Errorf("no request %q among %d", want, len(all))
		}
	}
}

func TestNoAbusiveLeavesOnlyNormalClients(t *testing.T) {
	r := &recorder{name: "a"}
	s := httptest.NewServer(r)
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	snap, err := Run(ctx, Config{Targets: []string{s.URL}, Normal: 2, NormalRate: 10, NoAbusive: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if snap.ByStatus[http.StatusTooManyRequests] != 0 || snap.ByStatus[http.StatusOK] == 0 {
		t.Fatalf("got %s", snap)
	}
}

func TestRunRefusesABadConfig(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no target is an error", Config{}, "no target"},
		{"a target that is not a URL is named", Config{Targets: []string{"localhost:8480"}}, `target 0: "localhost:8480"`},
		{"a negative client count is an error", Config{Targets: []string{"http://x"}, Normal: -1}, "client counts"},
		{"a negative rate is an error", Config{Targets: []string{"http://x"}, AbusiveRate: -2}, "rates must be above 0"},
		{"a path without a slash is named", Config{Targets: []string{"http://x"}, NormalPaths: []string{"GET hello"}}, `normal path 0: "GET hello"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Run(context.Background(), c.cfg, nil)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want it to mention %q", err, c.want)
			}
		})
	}
}

func TestSnapshotStringReportsNormalAndAbusiveApartWithStatusesInOrder(t *testing.T) {
	s := Snapshot{
		Normal:  Counts{Sent: 5, ByStatus: map[int]uint64{200: 5}},
		Abusive: Counts{Sent: 7, Errors: 1, ByStatus: map[int]uint64{429: 2, 200: 4}},
	}
	if got, want := s.String(), "normal: sent 5: 200=5, errors 0 | abusive: sent 7: 200=4 429=2, errors 1"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestValidateChecksWithoutSending(t *testing.T) {
	cfg := Config{Targets: []string{"http://127.0.0.1:1/"}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if cfg.Targets[0] != "http://127.0.0.1:1/" || cfg.Normal != 0 {
		t.Fatalf("Validate changed the config: %+v", cfg)
	}
	if err := (Config{Targets: []string{"ftp://x"}}).Validate(); err == nil {
		t.Fatal("Validate accepted an ftp target")
	}
}
