package admin

import (
	"bytes"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Refused tokens are counted one by one and logged at most once per
// interval, each line with how many were refused since the line before
// and the last peer.
func TestRefusedTokensAreCountedAndLoggedOncePerInterval(t *testing.T) {
	var logs bytes.Buffer
	now := time.Unix(1_700_000_000, 0)
	f := &AuthFailures{Logger: slog.New(slog.NewTextHandler(&logs, nil)), Interval: 10 * time.Second, Now: func() time.Time { return now }}
	g, err := NewTokenGuardWith(TokenGuardConfig{Tokens: []Token{{Name: "grafana", Secret: roToken}}, Failures: f})
	if err != nil {
		t.Fatal(err)
	}
	h := g.ReadOnly(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for i := 0; i < 5; i++ {
		if w := call(h, "GET", "/debug/top-limited", "wrong-0123456789abcdef", ""); w.Code != 401 {
			t.Fatalf("a wrong token: %d, want 401", w.Code)
		}
		now = now.Add(time.Second)
	}
	if w := call(h, "GET", "/debug/top-limited", roToken, ""); w.Code != 200 {
		t.Fatalf("a valid token: %d, want 200", w.Code)
	}
	if got := f.Total(); got != 5 {
		t.Errorf("Total = %d after 5 refusals and one success, want 5", got)
	}
	if n := strings.Count(logs.String(), "requests refused for their token"); n != 1 {
		t.Fatalf("%d lines within the interval, want 1:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "refused=1") || !strings.Contains(logs.String(), "last_peer=192.0.2.1:1234") {
		t.Errorf("the first line does not say WARN, refused=1 and the peer:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), "wrong-0123456789abcdef") {
		t.Errorf("the log shows the token presented:\n%s", logs.String())
	}
	logs.Reset()
	now = now.Add(10 * time.Second)
	call(h, "GET", "/debug/pprof/", "", "")
	if !strings.Contains(logs.String(), "refused=5") || !strings.Contains(logs.String(), `last_reason="no bearer token"`) {
		t.Errorf("the next line past the interval does not count the 4 left out and itself (refused=5):\n%s", logs.String())
	}
	if got := f.Total(); got != 6 {
		t.Errorf("Total = %d, want 6", got)
	}
}

// Without admin tokens, what the admin listener would show behind them is
// refused with a message saying to configure them.
func TestNeedsTokensSaysHowToConfigureThem(t *testing.T) {
	w := call(NeedsTokens(), "GET", "/debug/top-limited", "", "")
	if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "admin.tokens_file") || !strings.Contains(w.Body.String(), `"error": "admin_tokens_required"`) {
		t.Errorf("%d %s, want 403 naming admin.tokens_file", w.Code, w.Body)
	}
}
