package httplimit

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// Every way in is traced and recorded as a decision is: a commit, cancel or renewal of the
// decision API's reservations, a lease's renewal and release, and the middleware's own settle
// after the response each have their span, and what they did reaches the recorders.
func TestEveryWayInIsTracedAndRecorded(t *testing.T) {
	clk := newClock()
	chat := oneClass("chat", limiter.PerMinute(limiter.FixedWindow, 1000), "POST /v1/chat")
	chat.CostFrom, chat.Estimate = CostFrom{Header: "X-Usage-Tokens"}, Estimate{Default: 100}
	jobs := Class{Name: "jobs", Routes: []string{"/jobs/"}, Leases: map[string]limiter.LeaseLimit{"default": {Limit: 2, TTL: time.Minute}}}
	p, err := NewPolicy(PolicyConfig{Classes: []Class{chat, jobs}, Store: limiter.NewMemoryStore(limiter.MemoryConfig{Now: clk.Now})})
	if err != nil {
		t.Fatal(err)
	}
	tr, ev, rec := &traceLog{}, &costEvents{}, &leaseRecords{}
	m, err := New(Config{Policy: p, Now: clk.Now, Trace: tr.trace, Costs: ev, Recorder: rec})
	if err != nil {
		t.Fatal(err)
	}
	check, commit, renew, release := m.CheckHandler(), m.CommitHandler(), m.RenewHandler(), m.ReleaseHandler()
	spans := func(name string, want ...traced) {
		t.Helper()
		tr.mu.Lock()
		got := tr.list
		tr.list = nil
		tr.mu.Unlock()
		if len(got) != len(want) {
			t.Errorf("%s: %d spans, want %d", name, len(got), len(want))
			return
		}
		for i, w := range want {
			if *got[i] != w {
				t.Errorf("%s: span %d %+v, want %+v", name, i, *got[i], w)
			}
		}
	}
	chatSpan := func(s limiter.Status) traced {
		return traced{"POST /v1/chat", "default", limiter.FixedWindow, s, s == limiter.StatusAllowed, 1}
	}
	jobsSpan := func(s limiter.Status) traced {
		return traced{"/jobs/", "default", limiter.Concurrency, s, s == limiter.StatusAllowed, 1}
	}

	_, got, _ := checkCall(t, check, CheckPath, `{"key":"user:7","endpoint":"POST /v1/chat","reserve":true}`)
	tok, _ := got["reservation"].(string)
	spans("a reserving check", chatSpan(limiter.StatusAllowed))
	if code, got, _ := checkCall(t, renew, RenewPath, `{"reservation":"`+tok+`"}`); code != 200 {
		t.Fatalf("renew: %d %v", code, got)
	}
	spans("a renewal", chatSpan(limiter.StatusAllowed))
	if code, got, _ := checkCall(t, commit, CommitPath, `{"reservation":"`+tok+`","cost":40}`); code != 200 {
		t.Fatalf("commit: %d %v", code, got)
	}
	spans("a commit", chatSpan(limiter.StatusAllowed))
	if code, _, _ := checkCall(t, commit, CommitPath, `{"reservation":"`+tok+`","cancel":true}`); code != http.StatusConflict {
		t.Fatalf("a cancel of a settled reservation: %d, want 409", code)
	}
	spans("a cancel of what the store no longer holds", chatSpan(limiter.StatusRejected))
	ev.mu.Lock()
	if ev.reserved != 100 || len(ev.settled) != 1 || ev.settled[0].Actual != 40 || ev.expired != 0 {
		t.Errorf("after the decision API's settles: reserved %d, settled %+v, expired %d", ev.reserved, ev.settled, ev.expired)
	}
	ev.mu.Unlock()

	_, got, _ = checkCall(t, check, CheckPath, `{"key":"user:7","endpoint":"POST /jobs/run","lease":true}`)
	lease, _ := got["lease"].(string)
	spans("a lease", jobsSpan(limiter.StatusAllowed))
	if code, got, _ := checkCall(t, renew, RenewPath, `{"lease":"`+lease+`"}`); code != 200 {
		t.Fatalf("lease renew: %d %v", code, got)
	}
	spans("a lease renewed", jobsSpan(limiter.StatusAllowed))
	if code, got, _ := checkCall(t, release, ReleasePath, `{"lease":"`+lease+`"}`); code != 200 {
		t.Fatalf("release: %d %v", code, got)
	}
	spans("a lease released", jobsSpan(limiter.StatusAllowed))
	if code, _, _ := checkCall(t, release, ReleasePath, `{"lease":"`+lease+`"}`); code != http.StatusNotFound {
		t.Fatalf("a second release: %d, want 404", code)
	}
	spans("a lease released twice", jobsSpan(limiter.StatusRejected))
	if n := rec.held(); n != 0 {
		t.Errorf("%d leases in flight after one taken and released, want 0", n)
	}

	h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.RawQuery, "fail") {
			ReportUpstreamFailure(w)
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		w.Header().Set("X-Usage-Tokens", "30")
	}))
	for _, q := range []string{"", "fail"} {
		r := httptest.NewRequest("POST", "/v1/chat?"+q, nil)
		h.ServeHTTP(httptest.NewRecorder(), r)
		spans("a proxied request, "+q, chatSpan(limiter.StatusAllowed), chatSpan(limiter.StatusAllowed))
	}
	ev.mu.Lock()
	defer ev.mu.Unlock()
	if ev.reserved != 300 || len(ev.settled) != 3 || ev.settled[1].Actual != 30 || !ev.measured[1] || ev.settled[2].Refunded != 100 || ev.measured[2] {
		t.Errorf("after the middleware's settles: reserved %d, settled %+v measured %v", ev.reserved, ev.settled, ev.measured)
	}
}
