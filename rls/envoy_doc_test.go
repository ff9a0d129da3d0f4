package rls_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	ratelimitfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3" // resolves the Router's @type
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	httpoptsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"
)

// TestEnvoySnippetInTheDocsIsAValidEnvoyConfig reads the Envoy bootstrap of
// docs/envoy.md into go-control-plane's types (the ones Envoy's own API is
// generated from), validates every part, and checks that the rate limit
// filter points at a cluster speaking HTTP/2, as gRPC needs. No Envoy runs.
func TestEnvoySnippetInTheDocsIsAValidEnvoyConfig(t *testing.T) {
	doc, err := os.ReadFile("../docs/envoy.md")
	if err != nil {
		t.Fatal(err)
	}
	snippet := ""
	for _, block := range strings.Split(string(doc), "```yaml\n")[1:] {
		if b := block[:strings.Index(block, "```")]; strings.Contains(b, "static_resources:") {
			snippet = b
		}
	}
	if snippet == "" {
		t.Fatal("docs/envoy.md has no yaml block with static_resources")
	}
	var tree any
	if err := yaml.Unmarshal([]byte(snippet), &tree); err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(tree)
	if err != nil {
		t.Fatal(err)
	}
	var bs bootstrapv3.Bootstrap
	if err := protojson.Unmarshal(js, &bs); err != nil {
		t.Fatalf("the snippet is not an Envoy bootstrap: %v", err)
	}
	if err := bs.ValidateAll(); err != nil {
		t.Fatalf("bootstrap: %v", err)
	}

	var hcm hcmv3.HttpConnectionManager
	if err := bs.GetStaticResources().GetListeners()[0].GetFilterChains()[0].GetFilters()[0].GetTypedConfig().UnmarshalTo(&hcm); err != nil {
		t.Fatal(err)
	}
	if err := hcm.ValidateAll(); err != nil {
		t.Fatalf("http_connection_manager: %v", err)
	}
	var rl ratelimitfilterv3.RateLimit
	found := false
	for _, f := range hcm.GetHttpFilters() {
		if f.GetName() == "envoy.filters.http.ratelimit" {
			if err := f.GetTypedConfig().UnmarshalTo(&rl); err != nil {
				t.Fatal(err)
			}
			found = true
		}
	}
	if !found {
		t.Fatal("no envoy.filters.http.ratelimit filter")
	}
	if err := rl.ValidateAll(); err != nil {
		t.Fatalf("ratelimit filter: %v", err)
	}
	if rl.GetDomain() != "demo" {
		t.Errorf("filter domain %q, want the demo domain of examples/rls", rl.GetDomain())
	}
	if got := hcm.GetRouteConfig().GetVirtualHosts()[0].GetRoutes()[0].GetRoute().GetRateLimits(); len(got) == 0 {
		t.Error("the route has no rate_limits actions: Envoy would send no descriptors")
	}
	cluster := rl.GetRateLimitService().GetGrpcService().GetEnvoyGrpc().GetClusterName()
	h2 := false
	for _, c := range bs.GetStaticResources().GetClusters() {
		if c.GetName() != cluster {
			continue
		}
		var opts httpoptsv3.HttpProtocolOptions
		if err := c.GetTypedExtensionProtocolOptions()["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"].UnmarshalTo(&opts); err != nil {
			t.Fatalf("cluster %s: %v", cluster, err)
		}
		h2 = opts.GetExplicitHttpConfig().GetHttp2ProtocolOptions() != nil
	}
	if !h2 {
		t.Errorf("the filter's cluster %q is missing or does not speak HTTP/2", cluster)
	}
}
