//go:build !race

package server_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/server"
)

func TestGoalSixteenMegabyteHeadsAtOnceLeaveTheHeapBounded(t *testing.T) {
	// The upstream holds whatever reaches it until the heap is measured,
	// so that requests let through are all in memory at once.
	release := make(chan struct{})
	arrived := make(chan struct{}, 16)
	up := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		arrived <- struct{}{}
		<-release
	}))
	defer up.Close()
	upURL, _ := url.Parse(up.URL)
	srv := startServer(t, server.Config{Upstream: upURL})
	const clients = 16
	req := hugeHead // shared: the clients' own bytes are not the server's
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)

	statuses := make(chan int, clients)
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses <- sendRaw(t, srv.Addr("main"), req)
		}()
	}
	// Every request either answered or held by the upstream.
	answered := 0
	var codes []int
	deadline := time.After(20 * time.Second)
	for held := 0; answered+held < clients; {
		select {
		case code := <-statuses:
			answered++
			codes = append(codes, code)
		case <-arrived:
			held++
		case <-deadline:
			t.Fatalf("%d answered, %d held by the upstream after 20s, want %d", answered, held, clients)
		}
	}
	var peak runtime.MemStats
	runtime.ReadMemStats(&peak)
	close(release)
	wg.Wait()
	for range clients - answered {
		codes = append(codes, <-statuses)
	}
	growth := int64(peak.HeapInuse) - int64(before.HeapInuse)
	t.Logf("%d requests of %d bytes of headers at once: heap in use grew by %.1f MB", clients, len(req), float64(growth)/(1<<20))
	if growth > 20<<20 {
		t.Errorf("heap in use grew by %.1f MB, want under 20 MB", float64(growth)/(1<<20))
	}
	for _, code := range codes {
		if code != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("a %d-byte head: %d, want 431", len(req), code)
		}
	}
}
