package capacity

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

func TestLatencyGrowsBeyondTheWorkers(t *testing.T) {
	u := New(2, 20*time.Millisecond, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	srv := httptest.NewServer(u)
	defer srv.Close()
	took := func(n int) time.Duration {
		start := time.Now()
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				resp, err := http.Get(srv.URL)
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
			})
		}
		wg.Wait()
		return time.Since(start)
	}
	if d := took(2); d >= 40*time.Millisecond {
		t.Fatalf("2 requests on 2 workers took %s, want one service time (20ms)", d)
	}
	// 8 requests on 2 workers: four service times, one after the other.
	if d := took(8); d < 80*time.Millisecond {
		t.Fatalf("8 requests on 2 workers took %s, want at least 4 × 20ms", d)
	}
	if u.Served() != 10 || u.PeakInFlight() < 3 || u.InFlight() != 0 {
		t.Fatalf("served %d, peak %d, in flight %d; want 10 served, a queue seen, none left", u.Served(), u.PeakInFlight(), u.InFlight())
	}
}
