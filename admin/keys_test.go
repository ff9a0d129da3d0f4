package admin

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/rl-exporter/rl-exporter/httplimit"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/livelimits"
)

// stubKeys answers ResetClient with states and err, and remembers the call.
type stubKeys struct {
	client, class string
	states        []httplimit.ResetState
	err           error
}

func (s *stubKeys) ResetClient(_ context.Context, client, class string) ([]httplimit.ResetState, error) {
	s.client, s.class = client, class
	return s.states, s.err
}

func newKeysAPI(t *testing.T, keys KeyResetter) (http.Handler, *strings.Builder) {
	t.Helper()
	cache, err := livelimits.New(livelimits.Config{Backend: &livelimits.Memory{}, Targets: []livelimits.Target{
		{Class: "public", Tier: "free", Limit: limiter.PerMinute(limiter.TokenBucket, 10), Cost: 1},
	}})
	if err != nil {
		t.Fatal(err)
	}
	var audit strings.Builder
	api, err := New(Config{
		Tokens: []Token{{Name: "ops", ReadWrite: true, Secret: rwToken}, {Name: "grafana", Secret: roToken}},
		Cache:  cache, Logger: slog.New(slog.NewTextHandler(&audit, nil)), Keys: keys,
	})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	for p, h := range api.Handlers() {
		mux.Handle(p, h)
	}
	return mux, &audit
}

func TestAKeyResetNamesWhatItForgotAndIsAudited(t *testing.T) {
	keys := &stubKeys{states: []httplimit.ResetState{{Class: "public", PlanTier: "free", Endpoint: "/", Algorithm: limiter.TokenBucket}}}
	h, audit := newKeysAPI(t, keys)
	w := call(h, "DELETE", KeysPath+"/user:a%2Fb?class=public", rwToken, "")
	if w.Code != 200 {
		t.Fatalf("DELETE: %d %s", w.Code, w.Body)
	}
	if keys.client != "user:a/b" || keys.class != "public" {
		t.Fatalf("ResetClient(%q, %q), want the unescaped key user:a/b and class public", keys.client, keys.class)
	}
	var out KeysReset
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil || out.Key != "user:a/b" || len(out.Reset) != 1 || out.Reset[0].Algorithm != limiter.TokenBucket {
		t.Fatalf("answer %s (%v)", w.Body, err)
	}
	for _, want := range []string{"admin audit: rate-limit key reset", "token=ops", "action=reset_key", "key=user:a/b", "class=public", "budgets=1"} {
		if !strings.Contains(audit.String(), want) {
			t.Errorf("audit %q lacks %q", audit, want)
		}
	}
}

// A client key need not be UTF-8 (a user id header's obs-text bytes): its percent-encoded bytes
// name it as they are.
func TestAKeyResetNamesAKeyThatIsNotUTF8ByItsBytes(t *testing.T) {
	keys := &stubKeys{}
	h, _ := newKeysAPI(t, keys)
	if w := call(h, "DELETE", KeysPath+"/user:bob-%FF%FE", rwToken, ""); w.Code != 200 || keys.client != "user:bob-\xff\xfe" {
		t.Fatalf("DELETE user:bob-%%FF%%FE: %d %s, ResetClient(%q); want 200 and the key's own bytes", w.Code, w.Body, keys.client)
	}
}

func TestAKeyResetThatTheStoreFailsSays503AndWhatWasForgotten(t *testing.T) {
	keys := &stubKeys{
		states: []httplimit.ResetState{{Class: "public", PlanTier: "free", Endpoint: "/", Algorithm: limiter.TokenBucket}},
		err:    errors.New("redis store: reset: connection refused"),
	}
	h, audit := newKeysAPI(t, keys)
	w := call(h, "DELETE", KeysPath+"/user:1", rwToken, "")
	if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "store_unavailable") || !strings.Contains(w.Body.String(), `"plan_tier": "free"`) {
		t.Fatalf("DELETE with a failing store: %d %s; want 503 store_unavailable listing what was forgotten", w.Code, w.Body)
	}
	if !strings.Contains(audit.String(), "complete=false") {
		t.Errorf("audit %q does not say the reset was incomplete", audit)
	}
}

func TestTheKeysPathIsServedOnlyWithAResetter(t *testing.T) {
	h, _, _ := newAPI(t)
	if w := call(h, "DELETE", KeysPath+"/user:1", rwToken, ""); w.Code != http.StatusNotFound {
		t.Fatalf("DELETE without a KeyResetter: %d, want 404", w.Code)
	}
}
