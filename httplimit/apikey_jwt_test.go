package httplimit

import (
	"net/http"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// JWTs and API keys both in Authorization: a JWT (three dot-separated parts) is verified and
// wins, failing verification it keys by address (counted invalid_jwt); a bearer token that is
// no JWT is read as an API key.
func TestAJWTAndAnAPIKeyInAuthorizationAreToldApart(t *testing.T) {
	clk := newClock()
	secret := []byte("s3cret-for-tests")
	cfg := sdkKeyPolicy(false)
	cfg.Identity.JWT = &JWTConfig{Algorithm: "HS256", Secret: secret, Now: clk.Now}
	good := sign(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "alice", "exp": clk.Now().Add(time.Hour).Unix()})
	bad := sign(t, jwt.SigningMethodHS256, []byte("another"), jwt.MapClaims{"sub": "alice", "exp": clk.Now().Add(time.Hour).Unix()})
	for name, tc := range map[string]struct{ auth, key, fallback string }{
		"a JWT is verified":                 {"Bearer " + good, "user:alice", ""},
		"a JWT failing verification":        {"Bearer " + bad, "ip:203.0.113.7", FallbackInvalidJWT},
		"an OpenAI-style key is an API key": {"Bearer sk-pro", APIKeyKey("sk-pro"), ""},
	} {
		t.Run(name, func(t *testing.T) {
			rec := &fallbacks{}
			p, err := NewPolicy(cfg)
			if err != nil {
				t.Fatal(err)
			}
			m, err := New(Config{Policy: p, Recorder: rec, Now: clk.Now})
			if err != nil {
				t.Fatal(err)
			}
			do(m.Handler(http.NotFoundHandler()), "GET", "/", "203.0.113.7:1", map[string]string{"Authorization": tc.auth})
			if got := clientOf(rec.all()[0].Key); got != tc.key {
				t.Errorf("keyed by %q, want %q", got, tc.key)
			}
			if tc.fallback != "" && rec.reasons[tc.fallback] != 1 || tc.fallback == "" && len(rec.reasons) != 0 {
				t.Errorf("fallbacks %v, want %q", rec.reasons, tc.fallback)
			}
		})
	}
}
