package httplimit

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// downStore fails every decision, like a Redis that refuses connections.
type downStore struct{}

func (downStore) Decide(context.Context, string, limiter.Limit, int64) (limiter.Decision, error) {
	return limiter.Decision{}, errors.New("connection refused")
}

func (downStore) Name() string { return "redis" }

// hangingStore waits for its caller to cancel.
type hangingStore struct{}

func (hangingStore) Decide(ctx context.Context, _ string, _ limiter.Limit, _ int64) (limiter.Decision, error) {
	<-ctx.Done()
	return limiter.Decision{}, ctx.Err()
}

func (hangingStore) Name() string { return "redis" }

func TestADegradedDecisionSaysSoInTheDecisionAPIAndTheRecord(t *testing.T) {
	clk := newClock()
	m, _, rec := setup(t, PolicyConfig{Store: downStore{}, FailPolicy: limiter.FailLocal,
		Classes: []Class{oneClass("default", limiter.PerMinute(limiter.FixedWindow, 2))}}, clk)
	var got []CheckResponse
	for i := 0; i < 3; i++ {
		var resp CheckResponse
		w := postCheck(m.CheckHandler(), "", `{"key":"user:alice","endpoint":"GET /"}`)
		decodeJSON(t, w.Body.Bytes(), &resp)
		if !strings.Contains(w.Body.String(), `"degraded":true`) {
			t.Errorf("answer %d: %s lacks \"degraded\":true", i, w.Body.String())
		}
		got = append(got, resp)
	}
	if !got[0].Allowed || !got[1].Allowed || got[2].Allowed || got[2].Status != limiter.StatusRejected {
		t.Errorf("local decisions on a limit of 2: %+v, want allowed, allowed, rejected", got)
	}
	for _, r := range rec.all() {
		if r.Decision.Failure != limiter.FailureLocal || r.Err == nil {
			t.Errorf("record %+v: want Failure local with the store's error", r)
		}
	}
	// A decision the store made says nothing of degradation.
	m2, _, _ := setup(t, PolicyConfig{Classes: []Class{oneClass("default", limiter.PerMinute(limiter.FixedWindow, 2))}}, clk)
	if w := postCheck(m2.CheckHandler(), "", `{"key":"user:alice","endpoint":"GET /"}`); strings.Contains(w.Body.String(), "degraded") {
		t.Errorf("a store decision's answer mentions degraded: %s", w.Body.String())
	}
}

func TestACallerThatCancelsIsRecordedAsCanceledAndNotPassedOn(t *testing.T) {
	clk := newClock()
	p, err := NewPolicy(PolicyConfig{Store: hangingStore{}, Classes: []Class{oneClass("default", limiter.PerMinute(limiter.FixedWindow, 2))}})
	if err != nil {
		t.Fatal(err)
	}
	rec := &records{}
	m, err := New(Config{Policy: p, Recorder: rec, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	var passed atomic.Int64
	h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { passed.Add(1) }))
	ctx, cancel := context.WithCancel(context.Background())
	r := httptest.NewRequest("GET", "/", nil).WithContext(ctx)
	go cancel()
	h.ServeHTTP(httptest.NewRecorder(), r)
	if passed.Load() != 0 {
		t.Error("a request whose caller went away was passed on to the upstream")
	}
	all := rec.all()
	if len(all) != 1 || all[0].Status != limiter.StatusCanceled || all[0].Decision.Failure != limiter.FailureCanceled {
		t.Fatalf("records %+v, want one with status canceled", all)
	}
}
