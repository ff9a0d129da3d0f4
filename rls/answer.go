package rls

import (
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/rl-exporter/rl-exporter/decision"
)

// maxHeaders is the most response headers an answer carries: one per decision.HeaderNames
// (held equal by TestAnAnswerHasRoomForEveryHeader).
const maxHeaders = 9

// statusBlock is one descriptor's status with the messages it points to, allocated together.
type statusBlock struct {
	status rlsv3.RateLimitResponse_DescriptorStatus
	limit  rlsv3.RateLimitResponse_RateLimit
	reset  durationpb.Duration
}

// answer is a response with room for one descriptor's status and every header, so that the
// common call's response is one allocation. The response owns it: it is never reused.
type answer struct {
	resp       rlsv3.RateLimitResponse
	statuses   [1]*rlsv3.RateLimitResponse_DescriptorStatus
	one        statusBlock
	many       []statusBlock // the statuses of a request of more than one descriptor
	headerPtrs [maxHeaders]*corev3.HeaderValue
	headers    [maxHeaders]corev3.HeaderValue
}

// newAnswer returns an OK answer of n (≥ 1) statuses, each zero but for its code.
func newAnswer(n int) *answer {
	a := &answer{}
	a.resp.OverallCode = rlsv3.RateLimitResponse_OK
	if n == 1 {
		a.statuses[0] = &a.one.status
		a.resp.Statuses = a.statuses[:]
		return a
	}
	a.many = make([]statusBlock, n)
	a.resp.Statuses = make([]*rlsv3.RateLimitResponse_DescriptorStatus, n)
	for i := range a.many {
		a.resp.Statuses[i] = &a.many[i].status
	}
	return a
}

// block is the status block of descriptor i.
func (a *answer) block(i int) *statusBlock {
	if a.many == nil {
		return &a.one
	}
	return &a.many[i]
}

// headerMaps recycles the maps the header families are written into; safe for concurrent use.
var headerMaps = sync.Pool{New: func() any { return make(map[string][]string, maxHeaders) }}

// setHeaders puts the header families hc enables for o in the response's
// response_headers_to_add, as serve's HTTP path writes them, in decision.HeaderNames order.
func (a *answer) setHeaders(hc decision.HeaderConfig, o *outcome, now time.Time) {
	h := headerMaps.Get().(map[string][]string)
	defer func() {
		clear(h)
		headerMaps.Put(h)
	}()
	hc.WriteHeaders(h, o.rendered, o.Decision, now)
	out := a.headerPtrs[:0]
	for _, name := range decision.HeaderNames {
		v := h[name]
		if len(v) == 0 {
			continue
		}
		hv := &a.headers[len(out)]
		hv.Key, hv.Value = name, v[0]
		out = append(out, hv)
	}
	a.resp.ResponseHeadersToAdd = out
}
