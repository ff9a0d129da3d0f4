package httplimit

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/decision"
	"github.com/rl-exporter/rl-exporter/limiter"
)

// Header values a gateway may pass on that are not UTF-8: obs-text bytes (RFC 9110 §5.5), which
// net/http reads and writes as they are.
const (
	rawUser = "bob-\xff\xfe"
	rawOrg  = "org-\xff\xfe"
)

// A user id that is not UTF-8 reaches forward-auth through a real server (net/http takes its
// obs-text bytes as they are) and keys a reservation of one limit; the gateway's bodiless renewal
// and commit name that same reservation, which settles at the upstream's cost and leaves nothing
// open; /v1/usage, asked with the id percent-encoded, reads that budget, and a reset forgets it.
func TestForwardAuthOfAUserIDThatIsNotUTF8SettlesItsReservation(t *testing.T) {
	cl := oneClass("chat", limiter.PerMinute(limiter.FixedWindow, 1000), "/v1/chat")
	cl.CostFrom, cl.Estimate = CostFrom{Header: "X-Usage-Tokens"}, Estimate{Default: 100}
	clk := newClock()
	p, err := NewPolicy(PolicyConfig{Classes: []Class{cl}, Store: limiter.NewMemoryStore(limiter.MemoryConfig{Now: clk.Now}),
		Identity: IdentityConfig{UserHeader: "X-User-ID", TrustedHeaderPeers: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}})
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(Config{Policy: p, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(AuthPath, m.AuthHandler())
	mux.Handle(CommitPath, m.CommitHandler())
	mux.Handle(RenewPath, m.RenewHandler())
	mux.Handle(UsagePath, m.UsageHandler())
	srv := httptest.NewServer(mux)
	defer srv.Close()
	send := func(method, path string, hdr map[string]string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}

	resp, body := send(http.MethodGet, AuthPath, map[string]string{"X-Original-URI": "/v1/chat", "X-User-ID": rawUser})
	tok := resp.Header.Get(ReservationHeader)
	if resp.StatusCode != http.StatusOK || tok == "" {
		t.Fatalf("auth: %d %s, token %q; want 200 with a reservation", resp.StatusCode, body, tok)
	}
	if u := chatUsage(t, m, "user:"+rawUser); u.Used != 100 || u.OpenReservations != 1 {
		t.Fatalf("after auth: used %d, open %d; want the estimate of 100 held on %q", u.Used, u.OpenReservations, "user:"+rawUser)
	}
	if resp, body = send(http.MethodPost, RenewPath, map[string]string{ReservationHeader: tok}); resp.StatusCode != http.StatusOK {
		t.Errorf("renew: %d %s, want 200", resp.StatusCode, body)
	}
	resp, body = send(http.MethodPost, CommitPath, map[string]string{ReservationHeader: tok, CostHeader: "30"})
	var got CommitResponse
	_ = json.Unmarshal([]byte(body), &got)
	if resp.StatusCode != http.StatusOK || got.Actual != 30 || got.Refunded != 70 {
		t.Fatalf("commit at 30: %d %s; want 200, actual 30, refunded 70", resp.StatusCode, body)
	}
	if u := chatUsage(t, m, "user:"+rawUser); u.Used != 30 || u.OpenReservations != 0 {
		t.Fatalf("after the commit: used %d, open %d; want 30 used, nothing open", u.Used, u.OpenReservations)
	}
	resp, body = send(http.MethodGet, UsagePath+"?key=user:bob-%FF%FE", nil)
	var rep UsageReport
	_ = json.Unmarshal([]byte(body), &rep)
	if i := slices.IndexFunc(rep.Limits, func(l UsageLimit) bool { return l.Endpoint == "/v1/chat" }); resp.StatusCode != http.StatusOK || i < 0 || rep.Limits[i].Used != 30 {
		t.Errorf("GET %s?key=user:bob-%%FF%%FE: %d %s; want the budget of 30 used", UsagePath, resp.StatusCode, body)
	}
	if _, err := m.ResetClient(context.Background(), "user:"+rawUser, ""); err != nil {
		t.Fatal(err)
	}
	if u := chatUsage(t, m, "user:"+rawUser); u.Used != 0 {
		t.Errorf("after a reset: used %d, want 0", u.Used)
	}
}

// chatUsage is the usage of client's budget under the class chat on /v1/chat.
func chatUsage(t *testing.T, m *Middleware, client string) UsageLimit {
	t.Helper()
	rep, err := m.Usage(context.Background(), client, "")
	if err != nil {
		t.Fatalf("usage: %v", err)
	}
	for _, l := range rep.Limits {
		if l.Class == "chat" && l.Endpoint == "/v1/chat" {
			return l
		}
	}
	t.Fatalf("no usage of chat in %+v", rep.Limits)
	return UsageLimit{}
}

// Forward-auth on a tier of several limits, for a user id and an organisation (a header scope)
// that are not UTF-8, holds the estimate on the user's limits and the organisation's month; the
// token names each key as it is, so the bodiless renewal and commit settle every one of them and
// the lease token gives its slot back: nothing is left open or in flight.
func TestForwardAuthOfSeveralLimitsOnValuesThatAreNotUTF8SettlesEachLimit(t *testing.T) {
	for name, store := range llmStores(t) {
		t.Run(name, func(t *testing.T) {
			m := llmMiddleware(t, store, &costEvents{})
			r := httptest.NewRequest(http.MethodGet, AuthPath, nil)
			r.RemoteAddr = gatewayPeer
			for k, v := range map[string]string{"X-Original-URI": "/v1/chat", "X-Original-Method": "POST", "X-User-ID": rawUser, "X-Org-ID": rawOrg} {
				r.Header.Set(k, v)
			}
			w := httptest.NewRecorder()
			m.AuthHandler().ServeHTTP(w, r)
			tok, lease := w.Header().Get(ReservationHeader), w.Header().Get(LeaseHeader)
			if w.Code != http.StatusOK || tok == "" || lease == "" {
				t.Fatalf("auth: %d %s, reservation %q, lease %q; want 200 with both tokens", w.Code, w.Body, tok, lease)
			}
			usage := func() (map[string]int64, map[string]int64, int64) {
				u, open := map[string]int64{}, map[string]int64{}
				for _, n := range []string{"rpm", "tpm", "daily", "monthly"} {
					p := partUsage(t, m, "user:"+rawUser, "llm", n, org(rawOrg))
					u[n], open[n] = p.Used, p.OpenReservations
				}
				var inFlight int64 = -1
				if l := partUsage(t, m, "user:"+rawUser, "llm", "inflight", org(rawOrg)); l.InFlight != nil {
					inFlight = *l.InFlight
				}
				return u, open, inFlight
			}
			if u, open, _ := usage(); !equalCounts(u, map[string]int64{"rpm": 1, "tpm": 50, "daily": 50, "monthly": 50}) ||
				!equalCounts(open, map[string]int64{"rpm": 0, "tpm": 1, "daily": 1, "monthly": 1}) {
				t.Fatalf("after auth: used %s, open %s; want the estimate of 50 held on each limit of cost", toString(u), toString(open))
			}
			rn := httptest.NewRequest(http.MethodPost, RenewPath, nil)
			rn.Header.Set(ReservationHeader, tok)
			wr := httptest.NewRecorder()
			m.RenewHandler().ServeHTTP(wr, rn)
			if wr.Code != http.StatusOK {
				t.Errorf("renew: %d %s, want 200", wr.Code, wr.Body)
			}
			code, got := settleSet(t, m.CommitHandler(), map[string]string{ReservationHeader: tok, CostHeader: "30"})
			if code != http.StatusOK || got.Actual != 30 || len(got.Limits) != 3 {
				t.Fatalf("commit at 30: %d %+v; want 200, actual 30, three limits", code, got)
			}
			for _, l := range got.Limits {
				if !l.Settled || l.Actual != 30 {
					t.Errorf("commit: limit %s settled %v at %d, want settled at 30", l.Name, l.Settled, l.Actual)
				}
			}
			if code, out := releaseByHeader(m.ReleaseHandler(), lease, ""); code != http.StatusOK {
				t.Errorf("release: %d %v, want 200", code, out)
			}
			if u, open, inFlight := usage(); !equalCounts(u, map[string]int64{"rpm": 1, "tpm": 30, "daily": 30, "monthly": 30}) ||
				!equalCounts(open, map[string]int64{"rpm": 0, "tpm": 0, "daily": 0, "monthly": 0}) || inFlight != 0 {
				t.Fatalf("after the commit and release: used %s, open %s, in flight %d; want 30 used, nothing open or in flight",
					toString(u), toString(open), inFlight)
			}
		})
	}
}

// A token of strings that are UTF-8, the keys of every client so far, is the one the versions
// before wrote, byte for byte, so that a token of either is taken by the other; any string, UTF-8
// or not, is read back as it was given.
func TestAReservationTokenKeepsEveryKeyByteForByte(t *testing.T) {
	exp := time.Unix(1_700_000_060, 0)
	r := limiter.Reservation{ID: strings.Repeat("ab", 16), Estimate: 50, Expires: exp}
	old := func(prefix string, fields ...any) string {
		b, err := json.Marshal(fields)
		if err != nil {
			t.Fatal(err)
		}
		return prefix + base64.RawURLEncoding.EncodeToString(b)
	}
	key := "llm|default|POST /v1/chat|user:zoë <a&b>\u2028|tpm"
	one := reservationToken("POST /v1/chat", "default", "user:zoë <a&b>\u2028", r)
	if want := old("r1.", "POST /v1/chat", "default", "user:zoë <a&b>\u2028", r.ID, r.Estimate, exp.Unix()); one != want {
		t.Errorf("token of one limit on UTF-8 keys:\n got %s\nwant %s (the form before)", one, want)
	}
	parts := []decision.PartOutcome{{Name: "tpm", Key: key, Reservation: r}}
	set := setReservationToken("POST /v1/chat", "default", "user:zoë <a&b>\u2028", parts)
	if want := old("r2.", "POST /v1/chat", "default", "user:zoë <a&b>\u2028", r.ID, r.Estimate, exp.Unix(), [][2]string{{"tpm", key}}); set != want {
		t.Errorf("token of several limits on UTF-8 keys:\n got %s\nwant %s (the form before)", set, want)
	}

	for _, client := range []string{"user:" + rawUser, "user:\x80", "user:ok", "user:\xed\xa0\x80", "user:{\"b\":\"x\"}"} {
		for _, org := range []string{rawOrg, "\xc3", "acme"} {
			orgKey := "llm|*|h:X-Org-Id=" + org + "|monthly"
			parts := []decision.PartOutcome{
				{Name: "tpm\xff", Key: "llm|default|POST /v1/chat|" + client + "|tpm", Reservation: r},
				{Name: "monthly", Key: orgKey, Reservation: r},
			}
			tok, err := parseToken(setReservationToken("POST /v1/chat", "default\xfe", client, parts))
			if err != nil || tok.endpoint != "POST /v1/chat" || tok.tier != "default\xfe" || tok.client != client || tok.id != r.ID ||
				tok.estimate != 50 || !tok.expires.Equal(exp) || len(tok.parts) != 2 ||
				tok.parts[0] != (tokenPart{name: "tpm\xff", key: parts[0].Key}) || tok.parts[1] != (tokenPart{name: "monthly", key: orgKey}) {
				t.Fatalf("token of several limits for %q, org %q read back as %#v, %v", client, org, tok, err)
			}
			tok, err = parseToken(reservationToken("POST /v1/chat", "default", client, r))
			if err != nil || tok.client != client || tok.parts != nil {
				t.Fatalf("token of one limit for %q read back as %#v, %v", client, tok, err)
			}
		}
	}
}

// A reserve whose keys are not UTF-8 is bounded as any other: a token tokenFits lets through is
// within MaxReservationToken, however its strings are written.
func TestATokenOfKeysThatAreNotUTF8FitsWhereTokenFitsSaysSo(t *testing.T) {
	for _, n := range []int{1, 2, 3, 100, MaxUserKey} {
		for held := 1; held <= 24; held++ {
			a := decision.Ask{Endpoint: "POST /v1/chat", Tier: "default", Cost: 1 << 40, Set: &decision.SetAsk{}}
			for i := range held {
				a.Set.Parts = append(a.Set.Parts, decision.SetPart{Name: "\xff", Key: strings.Repeat("\xfe", n+i), Held: true})
			}
			client := strings.Repeat("\x80", n)
			if tokenFits(&a, client) == nil {
				if l := len(askToken(&a, client)); l > MaxReservationToken {
					t.Fatalf("keys of %d bytes on %d limits: tokenFits let a token of %d bytes through, past %d", n, held, l, MaxReservationToken)
				}
			}
		}
	}
}

// Any client, name and key a token is made of is read back as it was, byte for byte.
func FuzzAReservationTokenReadsBackItsStrings(f *testing.F) {
	f.Add("user:"+rawUser, "tpm", "llm|*|h:X-Org-Id="+rawOrg+"|monthly")
	f.Add("user:zoë", "\xff", `{"b":"AA=="}`)
	f.Add("", "{", "\x00")
	r := limiter.Reservation{ID: strings.Repeat("0", 32), Estimate: 1, Expires: time.Unix(1_700_000_000, 0)}
	f.Fuzz(func(t *testing.T, client, name, key string) {
		one, err := parseToken(reservationToken("POST /v1/chat", "default", client, r))
		if err != nil || one.client != client {
			t.Fatalf("token of one limit for %q read back as %q, %v", client, one.client, err)
		}
		if name == "" || key == "" {
			return
		}
		set, err := parseToken(setReservationToken("POST /v1/chat", "default", client, []decision.PartOutcome{{Name: name, Key: key, Reservation: r}}))
		if err != nil || set.client != client || len(set.parts) != 1 || set.parts[0] != (tokenPart{name: name, key: key}) {
			t.Fatalf("token of several limits for %q, %q, %q read back as %q %+q, %v", client, name, key, set.client, set.parts, err)
		}
	})
}
