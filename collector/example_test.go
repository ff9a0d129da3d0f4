package collector_test

import (
	"context"
	"fmt"
	"net/http"

	"github.com/rl-exporter/rl-exporter/collector"
	"github.com/rl-exporter/rl-exporter/limiter"
)

// A Collector is the limiter's Observer (store calls) and the HTTP layer's
// Recorder (decisions); its Handler serves /metrics.
func Example() {
	col, err := collector.New(collector.Config{
		Endpoints: []string{"/v1/search"},
		Tiers:     []string{"free", "pro"},
		Version:   "1.0.0",
	})
	if err != nil {
		panic(err)
	}
	lim, err := limiter.New(limiter.Config{
		Limit:    limiter.PerMinute(limiter.GCRA, 2),
		Store:    limiter.NewMemoryStore(limiter.MemoryConfig{}),
		Observer: col,
	})
	if err != nil {
		panic(err)
	}
	_ = col.SetLimit("/v1/search", "free", lim.Limit())

	ctx := context.Background()
	for range 3 {
		d, _ := lim.Allow(ctx, "client-7")
		status := limiter.StatusAllowed
		if !d.Allowed {
			status = limiter.StatusRejected
		}
		col.RecordDecision(ctx, limiter.Record{Endpoint: "/v1/search", PlanTier: "free", Key: "client-7", Limit: lim.Limit(), Status: status, Decision: d})
	}

	mux := http.NewServeMux()
	mux.Handle("/metrics", col.Handler())
	// On the admin listener only: it shows clients' keys.
	admin := http.NewServeMux()
	admin.Handle("/debug/top-limited", col.TopLimitedHandler())

	top := col.TopLimited(1).Current.Keys[0]
	fmt.Println(top.Key, top.Count)
	// Output: client-7 1
}
