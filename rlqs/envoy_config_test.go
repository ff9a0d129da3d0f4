package rlqs

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"
	"time"

	xdsmatcherv3 "github.com/cncf/xds/go/xds/type/matcher/v3"
	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlqsfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rate_limit_quota/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3" // resolves the Router's @type
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	httpoptsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/rl-exporter/rl-exporter/internal/eventually"
	"github.com/rl-exporter/rl-exporter/rlqs/filtersim"
	"github.com/rl-exporter/rl-exporter/rls"
)

const envoyExample = "../examples/envoy-rlqs.yaml"

// strict decodes an Envoy bootstrap in YAML as Envoy does: every field known, every @type resolved.
func strict(t *testing.T, src []byte) (*bootstrapv3.Bootstrap, error) {
	t.Helper()
	var tree any
	if err := yaml.Unmarshal(src, &tree); err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(tree)
	if err != nil {
		t.Fatal(err)
	}
	var bs bootstrapv3.Bootstrap
	if err := (protojson.UnmarshalOptions{DiscardUnknown: false}).Unmarshal(js, &bs); err != nil {
		return nil, err
	}
	return &bs, nil
}

// quotaFilter is the rate_limit_quota filter of bs's first listener, validated.
func quotaFilter(t *testing.T, bs *bootstrapv3.Bootstrap) *rlqsfilterv3.RateLimitQuotaFilterConfig {
	t.Helper()
	var hcm hcmv3.HttpConnectionManager
	if err := bs.GetStaticResources().GetListeners()[0].GetFilterChains()[0].GetFilters()[0].GetTypedConfig().UnmarshalTo(&hcm); err != nil {
		t.Fatal(err)
	}
	if err := hcm.ValidateAll(); err != nil {
		t.Fatalf("http_connection_manager: %v", err)
	}
	for _, f := range hcm.GetHttpFilters() {
		if f.GetName() != "envoy.filters.http.rate_limit_quota" {
			continue
		}
		var fc rlqsfilterv3.RateLimitQuotaFilterConfig
		if err := f.GetTypedConfig().UnmarshalTo(&fc); err != nil {
			t.Fatal(err)
		}
		if err := fc.ValidateAll(); err != nil {
			t.Fatalf("rate_limit_quota filter: %v", err)
		}
		return &fc
	}
	t.Fatal("no envoy.filters.http.rate_limit_quota filter")
	return nil
}

// exampleBuckets are the buckets the filter's matchers build, a header's value taken as "alice".
func exampleBuckets(t *testing.T, m *xdsmatcherv3.Matcher) []map[string]string {
	t.Helper()
	var actions []*xdsmatcherv3.Matcher_OnMatch
	for _, fm := range m.GetMatcherList().GetMatchers() {
		actions = append(actions, fm.GetOnMatch())
	}
	actions = append(actions, m.GetOnNoMatch())
	var out []map[string]string
	for _, a := range actions {
		var s rlqsfilterv3.RateLimitQuotaBucketSettings
		if err := a.GetAction().GetTypedConfig().UnmarshalTo(&s); err != nil {
			t.Fatalf("matcher action %q: %v", a.GetAction().GetName(), err)
		}
		if err := s.ValidateAll(); err != nil {
			t.Fatalf("bucket settings: %v", err)
		}
		bucket := map[string]string{}
		for k, v := range s.GetBucketIdBuilder().GetBucketIdBuilder() {
			bucket[k] = v.GetStringValue()
			if cv := v.GetCustomValue(); cv != nil {
				var in matcherv3.HttpRequestHeaderMatchInput
				if err := cv.GetTypedConfig().UnmarshalTo(&in); err != nil {
					t.Fatalf("bucket entry %q: %v", k, err)
				}
				bucket[k] = "alice"
			}
		}
		out = append(out, bucket)
	}
	return out
}

// TestEnvoyRLQSExampleIsAValidEnvoyConfig: examples/envoy-rlqs.yaml decodes strictly into
// go-control-plane's Bootstrap (what Envoy's API is generated from) and validates; its quota
// filter reaches rl-exporter's cluster over HTTP/2 with the quota service's health check; every
// bucket it builds is matched to a limited rule of examples/rlqs; and rl-exporter serving that
// directory assigns each bucket its rule's rate. No Envoy runs.
func TestEnvoyRLQSExampleIsAValidEnvoyConfig(t *testing.T) {
	src, err := os.ReadFile(envoyExample)
	if err != nil {
		t.Fatal(err)
	}
	bs, err := strict(t, src)
	if err != nil {
		t.Fatalf("%s is not an Envoy bootstrap: %v", envoyExample, err)
	}
	if err := bs.ValidateAll(); err != nil {
		t.Fatalf("bootstrap: %v", err)
	}
	fc := quotaFilter(t, bs)
	checkQuotaCluster(t, bs, fc.GetRlqsServer().GetEnvoyGrpc().GetClusterName())
	rules, err := rls.LoadDir("../examples/rlqs")
	if err != nil {
		t.Fatal(err)
	}
	rates := map[string]float64{}
	for _, b := range exampleBuckets(t, fc.GetBucketMatchers()) {
		r, ok := rules.MatchBucket(fc.GetDomain(), b)
		if !ok || r.Blocked || r.Unlimited || r.Refused != "" {
			t.Fatalf("bucket %v of domain %q: rule %+v (matched %v), want a limited rule of examples/rlqs", b, fc.GetDomain(), r, ok)
		}
		rates[filtersim.Key(b)] = limitOf(r).Rate
	}
	if rates["name=chat"] != 100 || rates["name=chat,user=alice"] != 5 {
		t.Fatalf("the example's buckets and their rules' rates: %v, want name=chat 100/s and name=chat,user=alice 5/s", rates)
	}
	srv := startServer(t, Config{Interval: time.Hour}, rules)
	c := client(t, time.Hour, srv.addr)
	for _, b := range []map[string]string{{"name": "chat"}, {"name": "chat", "user": "alice"}} {
		c.Request(b)
		eventually.True(t, 2*time.Second, filtersim.Key(b)+"'s token bucket at its rule's rate", func() bool {
			r := bucketRate(c, b)
			return r > 0.999*rates[filtersim.Key(b)] && r <= rates[filtersim.Key(b)]
		})
	}
}

// checkQuotaCluster checks that the quota filter's cluster exists, speaks HTTP/2, as gRPC needs,
// and health-checks the quota service by its gRPC name, which a draining replica reports
// NOT_SERVING.
func checkQuotaCluster(t *testing.T, bs *bootstrapv3.Bootstrap, name string) {
	t.Helper()
	for _, c := range bs.GetStaticResources().GetClusters() {
		if c.GetName() != name {
			continue
		}
		var opts httpoptsv3.HttpProtocolOptions
		if err := c.GetTypedExtensionProtocolOptions()["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"].UnmarshalTo(&opts); err != nil {
			t.Fatalf("cluster %s: %v", name, err)
		}
		if opts.GetExplicitHttpConfig().GetHttp2ProtocolOptions() == nil {
			t.Errorf("cluster %s does not speak HTTP/2", name)
		}
		var hc *corev3.HealthCheck_GrpcHealthCheck
		for _, h := range c.GetHealthChecks() {
			hc = h.GetGrpcHealthCheck()
		}
		if hc.GetServiceName() != ServiceName {
			t.Errorf("cluster %s health-checks %q, want the quota service %q", name, hc.GetServiceName(), ServiceName)
		}
		return
	}
	t.Fatalf("no cluster %q for the quota filter", name)
}

// TestTheStrictDecodeRefusesAMisspeltField: the decode above is strict, so a field Envoy does
// not know, nested in a typed config, fails it.
func TestTheStrictDecodeRefusesAMisspeltField(t *testing.T) {
	src, err := os.ReadFile(envoyExample)
	if err != nil {
		t.Fatal(err)
	}
	bad := bytes.Replace(src, []byte("reporting_interval: 5s"), []byte("report_interval: 5s"), 1)
	if bytes.Equal(bad, src) {
		t.Fatal("the example has no reporting_interval to misspell")
	}
	if _, err := strict(t, bad); err == nil {
		t.Fatal("a misspelt field in a bucket's settings was accepted")
	}
}
