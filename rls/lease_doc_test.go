package rls_test

import (
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// docs/envoy.md says why the rate limit service offers no concurrency
// limit; this holds what it says to Envoy's own API: a stream-done call
// exists, its hits_addend cannot be negative, and a request carries no id
// a release could name.
func TestEnvoysAPICannotGiveALeaseBack(t *testing.T) {
	action := (&routev3.RateLimit{}).ProtoReflect().Descriptor()
	if action.Fields().ByName("apply_on_stream_done") == nil {
		t.Fatal("RateLimit has no apply_on_stream_done: docs/envoy.md describes a field Envoy lacks")
	}
	req := (&rlsv3.RateLimitRequest{}).ProtoReflect().Descriptor()
	if k := req.Fields().ByName("hits_addend").Kind(); k != protoreflect.Uint32Kind {
		t.Fatalf("hits_addend is %s: docs/envoy.md says it cannot subtract", k)
	}
	for i := range req.Fields().Len() {
		if name := req.Fields().Get(i).Name(); name != "domain" && name != "descriptors" && name != "hits_addend" {
			t.Errorf("RateLimitRequest has a field %s: could it name a request to release? docs/envoy.md says none does", name)
		}
	}
}
