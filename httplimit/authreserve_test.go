package httplimit

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// authCostSetup is a middleware with one class, chat on /v1/chat, 1000 a minute, its cost read
// from X-Usage-Tokens and estimated by est, with its forward-auth and commit handlers.
func authCostSetup(t *testing.T, est Estimate) (auth, commit http.Handler, ev *costEvents) {
	t.Helper()
	cl := oneClass("chat", limiter.PerMinute(limiter.FixedWindow, 1000), "/v1/chat")
	cl.CostFrom, cl.Estimate = CostFrom{Header: "X-Usage-Tokens"}, est
	clk := newClock()
	p, err := NewPolicy(PolicyConfig{Classes: []Class{cl}, Store: limiter.NewMemoryStore(limiter.MemoryConfig{Now: clk.Now})})
	if err != nil {
		t.Fatal(err)
	}
	ev = &costEvents{}
	m, err := New(Config{Policy: p, Now: clk.Now, Costs: ev})
	if err != nil {
		t.Fatal(err)
	}
	return m.AuthHandler(), m.CommitHandler(), ev
}

// settle sends the commit a gateway sends after the response: no body, the token and cost in headers.
func settle(h http.Handler, hdr map[string]string, body string) (int, CommitResponse) {
	r := httptest.NewRequest(http.MethodPost, CommitPath, strings.NewReader(body))
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	var out CommitResponse
	_ = json.Unmarshal(w.Body.Bytes(), &out)
	return w.Code, out
}

// Forward-auth reserves the estimate and answers the token; the gateway's header-only commit
// settles it at the upstream's cost, or at the estimate when the cost is missing or invalid.
func TestForwardAuthReservesAndAHeaderCommitSettlesAtTheUpstreamsCost(t *testing.T) {
	authH, commitH, ev := authCostSetup(t, Estimate{Default: 100, Header: "X-Max-Tokens"})
	ask := func(hdr map[string]string) (string, string) {
		t.Helper()
		h := map[string]string{"X-Original-URI": "/v1/chat"}
		for k, v := range hdr {
			h[k] = v
		}
		w := auth(authH, "GET", AuthPath, h)
		if w.Code != http.StatusOK {
			t.Fatalf("auth: status %d %q", w.Code, w.Body)
		}
		return w.Header().Get(ReservationHeader), w.Header().Get("X-RateLimit-Remaining")
	}
	tok, rem := ask(nil)
	if tok == "" || rem != "900" {
		t.Fatalf("auth: %s %q, remaining %q; want a token and 900 (the default estimate reserved)", ReservationHeader, tok, rem)
	}
	big, rem := ask(map[string]string{"X-Max-Tokens": "250"})
	if big == "" || big == tok || rem != "650" {
		t.Fatalf("auth with X-Max-Tokens 250: token %q, remaining %q; want a new token and 650", big, rem)
	}
	code, got := settle(commitH, map[string]string{ReservationHeader: tok, CostHeader: "300"}, "")
	if code != http.StatusOK || got.Estimate != 100 || got.Actual != 300 || got.Charged != 200 {
		t.Fatalf("header commit at 300: %d %+v; want 200, estimate 100, actual 300, charged 200", code, got)
	}
	if code, _ = settle(commitH, map[string]string{ReservationHeader: tok, CostHeader: "300"}, ""); code != http.StatusConflict {
		t.Errorf("second commit of one token: %d, want 409", code)
	}
	code, got = settle(commitH, map[string]string{ReservationHeader: big}, "")
	if code != http.StatusOK || got.Actual != 250 || ev.unknown[CostMissing] != 1 {
		t.Fatalf("header commit without a cost: %d %+v, unknown %v; want settled at the estimate 250, one missing", code, got, ev.unknown)
	}
	third, _ := ask(nil)
	code, got = settle(commitH, map[string]string{ReservationHeader: third, CostHeader: "lots"}, "")
	if code != http.StatusOK || got.Actual != 100 || ev.unknown[CostInvalid] != 1 {
		t.Fatalf("header commit with cost %q: %d %+v, unknown %v; want settled at the estimate 100, one invalid", "lots", code, got, ev.unknown)
	}
	if _, rem = ask(nil); rem != "250" { // 1000 − 300 − 250 − 100 − this 100
		t.Errorf("after settling: remaining %q, want 250", rem)
	}
}

func TestAHeaderCommitRefusesWhatItCannotSettle(t *testing.T) {
	authH, commitH, _ := authCostSetup(t, Estimate{Default: 100})
	tok := auth(authH, "GET", AuthPath, map[string]string{"X-Original-URI": "/v1/chat"}).Header().Get(ReservationHeader)
	for _, c := range []struct {
		name string
		hdr  map[string]string
		body string
	}{
		{"a token and a body", map[string]string{ReservationHeader: tok}, `{"reservation":"` + tok + `","cost":1}`},
		{"a cost and a body", map[string]string{CostHeader: "1"}, `{"reservation":"` + tok + `","cost":1}`},
		{"no token", map[string]string{CostHeader: "1"}, ""},
		{"not a token", map[string]string{ReservationHeader: "r1.nonsense", CostHeader: "1"}, ""},
	} {
		if code, _ := settle(commitH, c.hdr, c.body); code != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400", c.name, code)
		}
	}
	if code, got := settle(commitH, map[string]string{ReservationHeader: tok, CostHeader: "7"}, ""); code != http.StatusOK || got.Actual != 7 {
		t.Errorf("the reservation after the refused commits: %d %+v, want settled at 7", code, got)
	}
}

// Forward-auth gets no body: a class estimated from a JSON member reserves its default.
func TestForwardAuthReservesTheDefaultOfAJSONEstimate(t *testing.T) {
	authH, _, _ := authCostSetup(t, Estimate{Default: 100, JSON: "max_tokens"})
	r := httptest.NewRequest("POST", AuthPath, strings.NewReader(`{"max_tokens":500}`))
	r.RemoteAddr = "127.0.0.1:5000"
	r.Header.Set("X-Original-URI", "/v1/chat")
	w := httptest.NewRecorder()
	authH.ServeHTTP(w, r)
	if w.Code != http.StatusOK || w.Header().Get(ReservationHeader) == "" || w.Header().Get("X-RateLimit-Remaining") != "900" {
		t.Fatalf("status %d, headers %v; want 200, a token, 900 remaining", w.Code, w.Header())
	}
}
