package rls_test

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	ratelimitfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// envoyCostPolicies reads the route's rate limit policies out of examples/envoy-cost.yaml,
// validated as Envoy's own types.
func envoyCostPolicies(t *testing.T) []*routev3.RateLimit {
	t.Helper()
	raw, err := os.ReadFile("../examples/envoy-cost.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var tree any
	if err := yaml.Unmarshal(raw, &tree); err != nil {
		t.Fatal(err)
	}
	js, _ := json.Marshal(tree)
	var bs bootstrapv3.Bootstrap
	if err := protojson.Unmarshal(js, &bs); err != nil {
		t.Fatalf("examples/envoy-cost.yaml is not an Envoy bootstrap: %v", err)
	}
	if err := bs.ValidateAll(); err != nil {
		t.Fatal(err)
	}
	var hcm hcmv3.HttpConnectionManager
	if err := bs.GetStaticResources().GetListeners()[0].GetFilterChains()[0].GetFilters()[0].GetTypedConfig().UnmarshalTo(&hcm); err != nil {
		t.Fatal(err)
	}
	route := hcm.GetRouteConfig().GetVirtualHosts()[0].GetRoutes()[0]
	var per ratelimitfilterv3.RateLimitPerRoute
	if err := route.GetTypedPerFilterConfig()["envoy.filters.http.ratelimit"].UnmarshalTo(&per); err != nil {
		t.Fatal(err)
	}
	if err := per.ValidateAll(); err != nil {
		t.Fatal(err)
	}
	return per.GetRateLimits()
}

var respFormat = regexp.MustCompile(`^%RESP\(([^)]+)\)%$`)

// envoyDescriptor is the descriptor Envoy's filter builds for policy p: an entry per
// request_headers action, the policy's hits_addend (its number, or its format evaluated on the
// response's headers as the substitution formatter does at stream end).
func envoyDescriptor(t *testing.T, p *routev3.RateLimit, reqHeaders, respHeaders map[string]string) *ratelimitv3.RateLimitDescriptor {
	t.Helper()
	d := &ratelimitv3.RateLimitDescriptor{}
	for _, a := range p.GetActions() {
		rh := a.GetRequestHeaders()
		if rh == nil {
			t.Fatalf("action %v: the test builds request_headers actions only", a)
		}
		d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: rh.GetDescriptorKey(), Value: reqHeaders[rh.GetHeaderName()]})
	}
	switch h := p.GetHitsAddend(); {
	case h == nil:
	case h.GetNumber() != nil:
		d.HitsAddend = wrapperspb.UInt64(h.GetNumber().GetValue())
	default:
		m := respFormat.FindStringSubmatch(h.GetFormat())
		if m == nil {
			t.Fatalf("hits_addend format %q: the test evaluates %%RESP(header)%% only", h.GetFormat())
		}
		n, err := strconv.ParseUint(respHeaders[m[1]], 10, 64)
		if err != nil {
			t.Fatalf("response header %s: %v", m[1], err)
		}
		d.HitsAddend = wrapperspb.UInt64(n)
	}
	return d
}

// Envoy peeks with hits_addend 0 on the request path and charges the response's tokens in its
// apply_on_stream_done call: the budget is spent by what the responses cost, past it by at most
// the request that crossed it, and the peeks refuse from then on.
func TestEnvoysPeekAndStreamDoneChargeSpendATokenBudget(t *testing.T) {
	policies := envoyCostPolicies(t)
	var onRequest, onDone *routev3.RateLimit
	for _, p := range policies {
		if p.GetApplyOnStreamDone() {
			onDone = p
		} else {
			onRequest = p
		}
	}
	if onRequest == nil || onDone == nil || onRequest.GetHitsAddend().GetNumber().GetValue() != 0 {
		t.Fatalf("want a request-path policy with hits_addend 0 and an apply_on_stream_done one, got %v", policies)
	}
	frozen := time.Unix(1_800_000_000, 0)
	store := limiter.NewMemoryStore(limiter.MemoryConfig{Now: func() time.Time { return frozen }})
	h := start(t, store, "../examples/rls-cost", nil)
	const budget = 10000
	req := map[string]string{"x-api-key": "team-a"}
	rng := rand.New(rand.NewPCG(1, 2))
	var charged, last int64
	served, refused := 0, 0
	for range 60 {
		resp := h.call(t, "llm", 0, envoyDescriptor(t, onRequest, req, nil))
		if resp.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT {
			refused++
			continue
		}
		if refused > 0 {
			t.Fatalf("a peek passed after one was refused, with %d charged", charged)
		}
		served++
		cost := 50 + rng.Int64N(451)
		h.call(t, "llm", 0, envoyDescriptor(t, onDone, req, map[string]string{"x-usage-tokens": strconv.FormatInt(cost, 10)}))
		charged += cost
		last = cost
	}
	if refused == 0 || charged < budget || charged > budget+last {
		t.Fatalf("%d served, %d refused, %d charged: want the budget %d spent and past it by at most the last request's %d",
			served, refused, charged, budget, last)
	}
	// Each request is one decision, its peek; the charges are costs.
	if a, r := h.count(t, "llm.api_key", "free", "allowed"), h.count(t, "llm.api_key", "free", "rejected"); a != float64(served) || r != float64(refused) {
		t.Errorf("counted %v allowed and %v rejected, want the %d peeks served and %d refused", a, r, served, refused)
	}
	if got := h.costTotal(t, "committed"); got != float64(charged) {
		t.Errorf("rate_limit_cost_total{phase=committed} = %v, want %d", got, charged)
	}
}

// costTotal reads rate_limit_cost_total of a phase, summed over its label sets.
func (h *harness) costTotal(t *testing.T, phase string) float64 {
	t.Helper()
	mfs, err := h.col.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var total float64
	for _, mf := range mfs {
		if mf.GetName() != "rate_limit_cost_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if labels(m)["phase"] == phase {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total
}
