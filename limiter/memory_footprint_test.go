//go:build !race

// Not under the race detector, whose shadow memory would be counted.

package limiter

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// footprintKeysEnv makes TestMemoryFootprintChild measure, in a process of
// its own, the memory the store takes for this many keys.
const footprintKeysEnv = "RL_EXPORTER_MEMORY_FOOTPRINT_KEYS"

// footprint is what the child measured, in bytes per key.
type footprint struct {
	Keys        int     `json:"keys"`
	RSSPerKey   float64 `json:"rss_per_key"`
	HeapPerKey  float64 `json:"heap_per_key"`
	InsertNanos float64 `json:"insert_ns_per_key"`
}

// measureFootprint runs TestMemoryFootprintChild in a fresh process, so
// that nothing else this test binary did is in its RSS.
func measureFootprint(t *testing.T, keys int) footprint {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestMemoryFootprintChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), footprintKeysEnv+"="+strconv.Itoa(keys))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("footprint child: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if rest, ok := strings.CutPrefix(line, "footprint: "); ok {
			var f footprint
			if err := json.Unmarshal([]byte(rest), &f); err != nil {
				t.Fatalf("footprint child said %q: %v", line, err)
			}
			return f
		}
	}
	t.Fatalf("footprint child printed no footprint:\n%s", out)
	return footprint{}
}

// TestGoalMemoryStoreRSSStaysNearTheLiveHeap holds a million keys in a
// MemoryStore, in a process of its own, and checks that the resident
// memory they take is within 1.5× of the live heap they take (measured
// after a GC), as the package documentation states:
//
//	go test -count=1 -run TestGoalMemoryStoreRSS -v ./limiter
func TestGoalMemoryStoreRSSStaysNearTheLiveHeap(t *testing.T) {
	f := measureFootprint(t, 1_000_000)
	ratio := f.RSSPerKey / f.HeapPerKey
	t.Logf("%d keys: RSS %.0f B per key, live heap %.0f B per key (%.2f×), %.0f ns per insertion",
		f.Keys, f.RSSPerKey, f.HeapPerKey, ratio, f.InsertNanos)
	if ratio > 1.5 {
		t.Errorf("RSS per key is %.2f× the live heap per key (%.0f B against %.0f B); want at most 1.5×", ratio, f.RSSPerKey, f.HeapPerKey)
	}
	if f.HeapPerKey > 340 {
		t.Errorf("live heap %.0f B per key; the documentation promises at most 340 B for a short key", f.HeapPerKey)
	}
}

// TestMemoryFootprintChild is the measuring side of
// TestGoalMemoryStoreRSSStaysNearTheLiveHeap; it does nothing unless run
// by it.
func TestMemoryFootprintChild(t *testing.T) {
	keys, _ := strconv.Atoi(os.Getenv(footprintKeysEnv))
	if keys <= 0 {
		t.Skip("run by TestGoalMemoryStoreRSSStaysNearTheLiveHeap")
	}
	names := make([]string, keys)
	for i := range names {
		// As serve builds them: class|tier|endpoint|client.
		names[i] = "default|free|GET /api/v1/x|ip:" + strconv.Itoa(i)
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	rssBefore := residentBytes(t)
	s := NewMemoryStore(MemoryConfig{MaxKeys: 2 * keys})
	bound := &memoryBinding{store: s, limit: compileLimit(PerHour(GCRA, 10))} // no key idle before the end
	start := time.Now()
	for _, k := range names {
		bound.decide(context.Background(), k, 1, ModeConsume, 0)
	}
	elapsed := time.Since(start)
	rss := residentBytes(t) - rssBefore
	runtime.GC()
	runtime.ReadMemStats(&after)
	heap := float64(after.HeapAlloc) - float64(before.HeapAlloc)
	if s.Len() != keys {
		t.Fatalf("the store holds %d keys, want %d", s.Len(), keys)
	}
	runtime.KeepAlive(names)
	b, _ := json.Marshal(footprint{Keys: keys, RSSPerKey: float64(rss) / float64(keys), HeapPerKey: heap / float64(keys),
		InsertNanos: float64(elapsed.Nanoseconds()) / float64(keys)})
	fmt.Printf("footprint: %s\n", b)
}

// residentBytes is this process's resident set size (VmRSS).
func residentBytes(t *testing.T) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc/self/status to read the RSS from: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS %q: %v", rest, err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}
