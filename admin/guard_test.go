package admin

import (
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
)

func guardedMux(t *testing.T) http.Handler {
	t.Helper()
	g, err := NewTokenGuard([]Token{{Name: "ops", ReadWrite: true, Secret: rwToken}, {Name: "grafana", Secret: roToken}})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/debug/top-limited", g.ReadOnly(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"keys":["default|free|/orders|user:alice"]}`))
	})))
	for p, h := range ProfilingHandlers() {
		mux.Handle(p, g.ReadOnly(h))
	}
	return mux
}

func TestTheGuardWantsAValidTokenOfEitherRole(t *testing.T) {
	h := guardedMux(t)
	for _, path := range []string{"/debug/top-limited", "/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/symbol"} {
		for _, c := range []struct {
			name, token string
			want        int
			challenge   string
		}{
			{"no token", "", 401, `Bearer realm="rl-exporter admin"`},
			{"a wrong token", "nope-0123456789abcdef", 401, `Bearer realm="rl-exporter admin", error="invalid_token"`},
			{"a read-only token", roToken, 200, ""},
			{"a read-write token", rwToken, 200, ""},
		} {
			w := call(h, "GET", path, c.token, "")
			if w.Code != c.want || w.Header().Get("WWW-Authenticate") != c.challenge {
				t.Errorf("%s with %s: %d, WWW-Authenticate %q; want %d, %q", path, c.name, w.Code, w.Header().Get("WWW-Authenticate"), c.want, c.challenge)
			}
			if c.want == 401 && strings.Contains(w.Body.String(), "alice") {
				t.Errorf("%s with %s: the body shows a client's key: %s", path, c.name, w.Body)
			}
		}
	}
}

func TestProfilesAreServedButNotTheCommandLine(t *testing.T) {
	h := guardedMux(t)
	if w := call(h, "GET", "/debug/pprof/", roToken, ""); w.Code != 200 || !strings.Contains(w.Body.String(), "goroutine") {
		t.Errorf("/debug/pprof/: %d, want 200 and the index of profiles", w.Code)
	}
	if w := call(h, "GET", "/debug/pprof/goroutine?debug=1", roToken, ""); w.Code != 200 || !strings.Contains(w.Body.String(), "goroutine profile:") {
		t.Errorf("/debug/pprof/goroutine: %d, want 200 and a goroutine profile", w.Code)
	}
	w := call(h, "GET", "/debug/pprof/cmdline", rwToken, "")
	if w.Code == 200 || strings.Contains(w.Body.String(), os.Args[0]) {
		t.Errorf("/debug/pprof/cmdline: %d %q, want it not served (the command line may carry a password)", w.Code, w.Body)
	}
}

func TestAGuardNeedsTokens(t *testing.T) {
	if _, err := NewTokenGuard(nil); err != ErrNoTokens {
		t.Errorf("NewTokenGuard(nil): %v, want ErrNoTokens", err)
	}
	if _, err := NewTokenGuard([]Token{{Name: "x"}}); err == nil {
		t.Error("a token without a secret accepted")
	}
}

func TestSetTokensRevokesTheTokensLeftOutAndAdmitsTheNewOnes(t *testing.T) {
	g, err := NewTokenGuard([]Token{{Name: "ops", ReadWrite: true, Secret: rwToken}, {Name: "grafana", Secret: roToken}})
	if err != nil {
		t.Fatal(err)
	}
	h := g.ReadOnly(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	const fresh = "fresh-0123456789abcdef"
	if err := g.SetTokens([]Token{{Name: "grafana", Secret: roToken}, {Name: "ops2", ReadWrite: true, Secret: fresh}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, token string
		want        int
	}{{"the revoked token", rwToken, 401}, {"the kept token", roToken, 200}, {"the new token", fresh, 200}} {
		if w := call(h, "GET", "/", c.token, ""); w.Code != c.want {
			t.Errorf("%s: %d, want %d", c.name, w.Code, c.want)
		}
	}
	if err := g.SetTokens([]Token{{Name: "x"}}); err == nil {
		t.Error("a token without a secret accepted")
	}
	if w := call(h, "GET", "/", fresh, ""); w.Code != 200 {
		t.Errorf("after a refused SetTokens: %d, want the tokens in force kept", w.Code)
	}
	if err := g.SetTokens(nil); err != nil {
		t.Fatal(err)
	}
	if w := call(h, "GET", "/", roToken, ""); w.Code != 401 {
		t.Errorf("with no token left: %d, want 401", w.Code)
	}
}

func TestTheOldGuardNamesStillMakeATokenGuard(t *testing.T) {
	var g *Guard
	g, err := NewGuard([]Token{{Name: "grafana", Secret: roToken}})
	if err != nil {
		t.Fatal(err)
	}
	var cfg GuardConfig = TokenGuardConfig{Tokens: []Token{{Name: "grafana", Secret: roToken}}, Realm: "r"}
	if _, err := NewGuardWith(cfg); err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodGet, "/debug/top-limited", nil)
	r.Header.Set("Authorization", "Bearer "+roToken)
	g.ReadOnly(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })).ServeHTTP(w, r)
	if w.Code != http.StatusTeapot {
		t.Errorf("a valid token through the old names: %d, want the guarded handler's %d", w.Code, http.StatusTeapot)
	}
}
