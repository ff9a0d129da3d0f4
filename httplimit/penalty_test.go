package httplimit

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

func penaltyPolicy() PolicyConfig {
	c := oneClass("api", limiter.PerMinute(limiter.FixedWindow, 1), "GET /a")
	c.Penalty = limiter.Penalty{After: 3, Within: time.Minute, For: 10 * time.Minute}
	return PolicyConfig{Classes: []Class{c}}
}

func statuses(rec *records) []limiter.Status {
	var out []limiter.Status
	for _, r := range rec.all() {
		out = append(out, r.Status)
	}
	return out
}

func TestAKeyRefusedThreeTimesIsPenalizedForTheWholeFor(t *testing.T) {
	clk := newClock()
	m, h, rec := setup(t, penaltyPolicy(), clk)
	for i := range 4 {
		w := do(h, "GET", "/a", "10.0.0.1:1", nil)
		if want := []int{200, 429, 429, 429}[i]; w.Code != want {
			t.Fatalf("request %d: %d, want %d", i+1, w.Code, want)
		}
	}
	w := do(h, "GET", "/a", "10.0.0.1:1", nil)
	var body RejectedBody
	decodeJSON(t, w.Body.Bytes(), &body)
	if w.Code != 429 || body.Error != "rate_limit_penalized" || body.Status != limiter.StatusPenalized || body.RetryAfter != 600 ||
		!strings.Contains(body.Message, "penalized") || !strings.Contains(body.Message, "600 s") {
		t.Errorf("after three refusals: %d %+v, want 429 penalized for 600 s", w.Code, body)
	}
	if got := w.Header().Get("Retry-After"); got != "600" {
		t.Errorf("Retry-After %q, want 600, the penalty's time", got)
	}
	rep, err := m.Usage(context.Background(), "ip:10.0.0.1", "")
	if err != nil {
		t.Fatal(err)
	}
	if u := findUsage(t, rep, "api", "GET /a"); u.PenalizedUntil == nil || !u.PenalizedUntil.Equal(clk.Now().Add(10*time.Minute)) {
		t.Errorf("usage while penalized: %+v, want penalized_until in 10 minutes", u)
	}
	if other := do(h, "GET", "/a", "10.0.0.2:1", nil); other.Code != 200 {
		t.Errorf("another client: %d, want 200: the box is per key", other.Code)
	}
	clk.Advance(10*time.Minute - time.Second) // the limit's window has long come round
	w = do(h, "GET", "/a", "10.0.0.1:1", nil)
	if w.Code != 429 || w.Header().Get("Retry-After") != "1" {
		t.Errorf("a second before the penalty ends: %d, Retry-After %q; want 429 and 1", w.Code, w.Header().Get("Retry-After"))
	}
	clk.Advance(time.Second)
	if w = do(h, "GET", "/a", "10.0.0.1:1", nil); w.Code != 200 {
		t.Errorf("when the penalty ends: %d, want 200", w.Code)
	}
	want := []limiter.Status{"allowed", "rejected", "rejected", "rejected", "penalized", "allowed", "penalized", "allowed"}
	if got := statuses(rec); strings.Join(toStrings(got), " ") != strings.Join(toStrings(want), " ") {
		t.Errorf("recorded %v, want %v", got, want)
	}
}

func toStrings(ss []limiter.Status) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = string(s)
	}
	return out
}

func TestTheDecisionAPISaysPenalizedAndTheKeyResetLiftsIt(t *testing.T) {
	clk := newClock()
	m, _, _ := setup(t, penaltyPolicy(), clk)
	body := `{"key":"user:7","endpoint":"GET /a"}`
	for range 4 {
		postCheck(m.CheckHandler(), "", body)
	}
	w := postCheck(m.CheckHandler(), "", body)
	var resp CheckResponse
	decodeJSON(t, w.Body.Bytes(), &resp)
	if w.Code != 429 || resp.Status != limiter.StatusPenalized || resp.Error != "rate_limit_penalized" || resp.RetryAfter != 600 {
		t.Fatalf("check after three refusals: %d %+v, want 429 penalized, retry 600", w.Code, resp)
	}
	states, err := m.ResetClient(context.Background(), "user:7", "")
	if err != nil {
		t.Fatal(err)
	}
	lifted := false
	for _, s := range states {
		lifted = lifted || s.Penalty && s.Class == "api"
	}
	if !lifted {
		t.Errorf("reset states %+v: none says the penalty of api was lifted", states)
	}
	if w := postCheck(m.CheckHandler(), "", body); w.Code != 200 {
		t.Errorf("check after the key reset: %d %s, want 200", w.Code, w.Body)
	}
}

func TestADryRunNeitherStrikesNorIsPenalizedUnseen(t *testing.T) {
	clk := newClock()
	m, _, _ := setup(t, penaltyPolicy(), clk)
	postCheck(m.CheckHandler(), "", `{"key":"k","endpoint":"GET /a"}`)
	for range 5 {
		postCheck(m.CheckHandler(), "", `{"key":"k","endpoint":"GET /a","dry_run":true}`)
	}
	w := postCheck(m.CheckHandler(), "", `{"key":"k","endpoint":"GET /a"}`)
	var resp CheckResponse
	decodeJSON(t, w.Body.Bytes(), &resp)
	if resp.Status != limiter.StatusRejected {
		t.Errorf("after five refused dry runs: %s, want rejected (a dry run takes nothing, strikes included)", resp.Status)
	}
}

type plainStore struct{ limiter.Store }

func TestAPenaltyOnAStoreThatKeepsNoneIsRefused(t *testing.T) {
	cfg := penaltyPolicy()
	cfg.Store = plainStore{limiter.NewMemoryStore(limiter.MemoryConfig{})}
	_, err := NewPolicy(cfg)
	if err == nil || !errors.Is(err, limiter.ErrNoPenalties) || !strings.Contains(err.Error(), `class "api": penalty`) {
		t.Errorf("NewPolicy: %v, want an error naming class api's penalty", err)
	}
	cfg = penaltyPolicy()
	cfg.Classes[0].Penalty.For = 0
	cfg.Store = limiter.NewMemoryStore(limiter.MemoryConfig{})
	if _, err := NewPolicy(cfg); err == nil || !strings.Contains(err.Error(), `class "api": penalty: for`) {
		t.Errorf("NewPolicy with no for: %v, want an error naming penalty: for", err)
	}
}
