package httplimit

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// manyLimitsMiddleware is a class llm on POST /v1/chat that reads its cost (estimate 50) with a
// tier of clientScoped limits of cost counted per client (c0, c1, ...) beside orgScoped counted
// per X-Org-ID (o0, o1, ...), each far from its quota.
func manyLimitsMiddleware(t *testing.T, clientScoped, orgScoped int) *Middleware {
	t.Helper()
	var tier []TierLimit
	for i := range clientScoped {
		tier = append(tier, TierLimit{Name: fmt.Sprintf("c%d", i), Limit: limiter.Limit{Algorithm: limiter.FixedWindow, Rate: 1e6, Period: time.Hour}})
	}
	for i := range orgScoped {
		tier = append(tier, TierLimit{Name: fmt.Sprintf("o%d", i), Limit: limiter.Limit{Algorithm: limiter.FixedWindow, Rate: 1e6, Period: time.Hour},
			Scope: Scope{Kind: ScopeHeader, Header: "X-Org-ID"}})
	}
	return llmClassMiddleware(t, limiter.NewMemoryStore(limiter.MemoryConfig{}), tier, Config{})
}

// The longest key and scope value the decision API keeps as they are: a check's key of
// MaxCheckKey bytes, a header value of MaxUserKey (a longer one is hashed).
var (
	longKey = "user:" + strings.Repeat("k", MaxCheckKey-len("user:"))
	longOrg = strings.Repeat("o", MaxUserKey)
)

// A reservation on a tier of several limits whose keys are as long as the decision API keeps
// them answers a token longer than a check's body may be; the renewal, the commit and the
// bodiless commit take it back all the same, and settle every limit.
func TestATokenOfManyLimitsOnLongKeysIsTakenBack(t *testing.T) {
	m := manyLimitsMiddleware(t, 4, 4)
	ask := `{"key":"` + longKey + `","endpoint":"POST /v1/chat","reserve":true,"headers":{"X-Org-ID":"` + longOrg + `"}}`
	reserve := func() string {
		t.Helper()
		var got CheckResponse
		if code := post(t, m.CheckHandler(), CheckPath, ask, &got); code != http.StatusOK || got.Reservation == "" {
			t.Fatalf("reserving check: %d %+v, want 200 with a reservation", code, got)
		}
		return got.Reservation
	}
	tok := reserve()
	if len(tok) <= MaxCheckBody {
		t.Fatalf("token of %d bytes: the test wants one past the %d bytes of a check body", len(tok), MaxCheckBody)
	}
	var rn RenewResponse
	if code := post(t, m.RenewHandler(), RenewPath, `{"reservation":"`+tok+`"}`, &rn); code != http.StatusOK || !rn.Renewed {
		t.Errorf("renew of a %d-byte token: %d %+v, want renewed", len(tok), code, rn)
	}
	var c setCommitAnswer
	if code := post(t, m.CommitHandler(), CommitPath, `{"reservation":"`+tok+`","cost":20}`, &c); code != http.StatusOK || len(c.Limits) != 8 {
		t.Fatalf("commit of a %d-byte token: %d %+v, want 200 settling eight limits", len(tok), code, c)
	}
	for _, l := range c.Limits {
		if !l.Settled || l.Actual != 20 || l.Refunded != 30 {
			t.Errorf("limit %+v: want settled at 20, 30 refunded", l)
		}
	}
	if code, got := settleSet(t, m.CommitHandler(), map[string]string{ReservationHeader: reserve(), CostHeader: "10"}); code != http.StatusOK || len(got.Limits) != 8 {
		t.Fatalf("bodiless commit: %d %+v, want 200 settling eight limits", code, got)
	}
	for _, name := range []string{"c0", "c3", "o0", "o3"} {
		if u := partUsage(t, m, longKey, "llm", name, http.Header{"X-Org-Id": {longOrg}}); u.Used != 30 || u.OpenReservations != 0 {
			t.Errorf("%s: used %d, open %d; want 30 (20 and 10), none open", name, u.Used, u.OpenReservations)
		}
	}
}

// A reservation whose token would be longer than MaxReservationToken (a tier of very many limits,
// each on a long key) is refused before anything is taken, saying why: the decision API's 400,
// forward-auth's refusal (request_too_large). No client is handed a token it cannot send back.
func TestAReservationWhoseTokenWouldNotFitIsRefusedTakingNothing(t *testing.T) {
	m := manyLimitsMiddleware(t, 60, 0)
	var bad RejectedBody
	if code := post(t, m.CheckHandler(), CheckPath, `{"key":"`+longKey+`","endpoint":"POST /v1/chat","reserve":true}`, &bad); code != http.StatusBadRequest ||
		!strings.Contains(bad.Message, "token") {
		t.Fatalf("reserving check: %d %+v, want 400 about the token's length", code, bad)
	}
	if u := partUsage(t, m, longKey, "llm", "c0", nil); u.Used != 0 {
		t.Errorf("after the refused check: c0 used %d, want nothing taken", u.Used)
	}
	// Without reserve nothing is handed back: decided as ever.
	var ok CheckResponse
	if code := post(t, m.CheckHandler(), CheckPath, `{"key":"`+longKey+`","endpoint":"POST /v1/chat","cost":5}`, &ok); code != http.StatusOK {
		t.Fatalf("check without reserve: %d %+v, want 200", code, ok)
	}

	user := strings.Repeat("u", MaxUserKey)
	r := httptest.NewRequest(http.MethodGet, AuthPath, nil)
	r.RemoteAddr = gatewayPeer
	r.Header.Set("X-Original-URI", "/v1/chat")
	r.Header.Set("X-Original-Method", "POST")
	r.Header.Set("X-User-ID", user)
	w := httptest.NewRecorder()
	m.AuthHandler().ServeHTTP(w, r)
	var refused RejectedBody
	decodeJSON(t, w.Body.Bytes(), &refused)
	if w.Code != http.StatusTooManyRequests || refused.Error != DenyRequestTooLarge.String() || !strings.Contains(refused.Message, "token") ||
		w.Header().Get(ReservationHeader) != "" || m.AuthDenied(DenyRequestTooLarge) != 1 {
		t.Fatalf("forward-auth: %d %+v, reservation %q, denied %d; want the refusal request_too_large about the token, no reservation",
			w.Code, refused, w.Header().Get(ReservationHeader), m.AuthDenied(DenyRequestTooLarge))
	}
	if u := partUsage(t, m, "user:"+user, "llm", "c0", nil); u.Used != 0 {
		t.Errorf("after the refused forward-auth: c0 used %d, want nothing taken", u.Used)
	}
}
