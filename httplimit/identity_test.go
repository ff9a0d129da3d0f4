package httplimit

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// testGateway trusts the peer most tests send from, 192.0.2.1, with the
// user and tier headers, as a gateway in front would be.
var testGateway = []netip.Prefix{netip.MustParsePrefix("192.0.2.1/32")}

func lastKey(t *testing.T, rec *records) string {
	t.Helper()
	all := rec.all()
	if len(all) == 0 {
		t.Fatal("nothing recorded")
	}
	return all[len(all)-1].Key
}

func clientOf(key string) string {
	// class|tier|endpoint|client
	n := 0
	for i := range key {
		if key[i] == '|' {
			n++
			if n == 3 {
				return key[i+1:]
			}
		}
	}
	return key
}

func TestForwardedAddressesAreBelievedOnlyFromTrustedProxies(t *testing.T) {
	_, h, rec := setup(t, PolicyConfig{Identity: IdentityConfig{
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")},
	}}, newClock())
	cases := []struct {
		name   string
		remote string
		hdr    map[string]string
		want   string
	}{
		{"an untrusted peer forging X-Forwarded-For is keyed by its own address",
			"203.0.113.7:4000", map[string]string{"X-Forwarded-For": "198.51.100.1"}, "ip:203.0.113.7"},
		{"an untrusted peer forging Forwarded is keyed by its own address",
			"203.0.113.7:4000", map[string]string{"Forwarded": "for=198.51.100.1"}, "ip:203.0.113.7"},
		{"a trusted proxy's X-Forwarded-For names the client",
			"10.1.2.3:4000", map[string]string{"X-Forwarded-For": "198.51.100.1"}, "ip:198.51.100.1"},
		{"a client prepending a forged hop behind a trusted proxy is keyed by its real address",
			"10.1.2.3:4000", map[string]string{"X-Forwarded-For": "1.1.1.1, 198.51.100.1"}, "ip:198.51.100.1"},
		{"a chain of trusted proxies is walked from the right",
			"10.1.2.3:4000", map[string]string{"X-Forwarded-For": "198.51.100.1, 10.9.9.9"}, "ip:198.51.100.1"},
		{"Forwarded is not read by default",
			"[fd00::1]:4000", map[string]string{"Forwarded": `for="[2001:db8::17]:4711";proto=https`, "X-Forwarded-For": "198.51.100.1"}, "ip:198.51.100.1"},
		{"an unreadable hop stops at the trusted proxy that added it",
			"10.1.2.3:4000", map[string]string{"X-Forwarded-For": "198.51.100.1, garbage"}, "ip:10.1.2.3"},
		{"a trusted proxy without forwarding headers is the client",
			"10.1.2.3:4000", nil, "ip:10.1.2.3"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			do(h, "GET", "/", c.remote, c.hdr)
			if got := clientOf(lastKey(t, rec)); got != c.want {
				t.Errorf("keyed by %q, want %q", got, c.want)
			}
		})
	}
}

func TestAForgedForwardedHeaderDoesNotEscapeTheLimit(t *testing.T) {
	_, h, _ := setup(t, PolicyConfig{Classes: []Class{oneClass("default", limiter.PerMinute(limiter.FixedWindow, 2))}}, newClock())
	codes := []int{}
	for i := 0; i < 4; i++ {
		w := do(h, "GET", "/", "203.0.113.7:4000", map[string]string{"X-Forwarded-For": "198.51.100." + string(rune('1'+i))})
		codes = append(codes, w.Code)
	}
	if codes[2] != 429 || codes[3] != 429 {
		t.Errorf("statuses %v: a client rotating X-Forwarded-For must still be limited after 2", codes)
	}
}

type jwtKeys struct {
	hsSecret []byte
	rsa      *rsa.PrivateKey
	ec       *ecdsa.PrivateKey
}

func pemPublic(t *testing.T, pub any) []byte {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

func sign(t *testing.T, m jwt.SigningMethod, key any, claims jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(m, claims).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestJWTSubjectsAreTrustedOnlyWhenTheTokenVerifies(t *testing.T) {
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ek, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	otherRSA, _ := rsa.GenerateKey(rand.Reader, 2048)
	clk := newClock()
	exp := clk.Now().Add(time.Hour).Unix()
	past := clk.Now().Add(-time.Minute).Unix()
	secret := []byte("s3cret-for-tests")

	type tc struct {
		name  string
		cfg   JWTConfig
		token string
		want  string
	}
	cases := []tc{
		{"a valid HS256 token keys by sub", JWTConfig{Algorithm: "HS256", Secret: secret},
			sign(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "alice", "exp": exp}), "user:alice"},
		{"an HS256 token with a bad signature keys by IP", JWTConfig{Algorithm: "HS256", Secret: secret},
			sign(t, jwt.SigningMethodHS256, []byte("wrong"), jwt.MapClaims{"sub": "alice", "exp": exp}), "ip:192.0.2.1"},
		{"an expired token keys by IP", JWTConfig{Algorithm: "HS256", Secret: secret},
			sign(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "alice", "exp": past}), "ip:192.0.2.1"},
		{"a token without expiry keys by IP", JWTConfig{Algorithm: "HS256", Secret: secret},
			sign(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "alice"}), "ip:192.0.2.1"},
		{"a token signed with another algorithm than the pinned one keys by IP", JWTConfig{Algorithm: "HS256", Secret: secret},
			sign(t, jwt.SigningMethodHS512, secret, jwt.MapClaims{"sub": "alice", "exp": exp}), "ip:192.0.2.1"},
		{"an alg=none token keys by IP", JWTConfig{Algorithm: "HS256", Secret: secret},
			sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, jwt.MapClaims{"sub": "alice", "exp": exp}), "ip:192.0.2.1"},
		{"a valid RS256 token keys by sub", JWTConfig{Algorithm: "RS256", PublicKeyPEM: pemPublic(t, &rk.PublicKey)},
			sign(t, jwt.SigningMethodRS256, rk, jwt.MapClaims{"sub": "bob", "exp": exp}), "user:bob"},
		{"an RS256 token from another key keys by IP", JWTConfig{Algorithm: "RS256", PublicKeyPEM: pemPublic(t, &rk.PublicKey)},
			sign(t, jwt.SigningMethodRS256, otherRSA, jwt.MapClaims{"sub": "bob", "exp": exp}), "ip:192.0.2.1"},
		{"an HS256 token signed with the RSA public key as secret keys by IP", JWTConfig{Algorithm: "RS256", PublicKeyPEM: pemPublic(t, &rk.PublicKey)},
			sign(t, jwt.SigningMethodHS256, pemPublic(t, &rk.PublicKey), jwt.MapClaims{"sub": "bob", "exp": exp}), "ip:192.0.2.1"},
		{"a valid ES256 token keys by sub", JWTConfig{Algorithm: "ES256", PublicKeyPEM: pemPublic(t, &ek.PublicKey)},
			sign(t, jwt.SigningMethodES256, ek, jwt.MapClaims{"sub": "carol", "exp": exp}), "user:carol"},
		{"a wrong audience keys by IP", JWTConfig{Algorithm: "HS256", Secret: secret, Audience: "api"},
			sign(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "alice", "exp": exp, "aud": "other"}), "ip:192.0.2.1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := c.cfg
			cfg.Now = clk.Now
			_, h, rec := setup(t, PolicyConfig{Identity: IdentityConfig{JWT: &cfg, UserHeader: "X-User-ID", TrustedHeaderPeers: testGateway}}, clk)
			// X-User-ID is sent too, from a peer trusted to send it: an
			// invalid token must not fall back to it.
			do(h, "GET", "/", "192.0.2.1:1", map[string]string{"Authorization": "Bearer " + c.token, "X-User-ID": "mallory"})
			if got := clientOf(lastKey(t, rec)); got != c.want {
				t.Errorf("keyed by %q, want %q", got, c.want)
			}
		})
	}
}

func TestIdentitySourcesInOrder(t *testing.T) {
	// Unknown API keys are an identity of their own only when allowed.
	_, h, rec := setup(t, PolicyConfig{Identity: IdentityConfig{UserHeader: "X-User-ID", APIKeyHeaders: []string{"X-API-Key"}, AllowUnknownAPIKeys: true, TrustedHeaderPeers: testGateway}}, newClock())
	cases := []struct {
		name string
		hdr  map[string]string
		ctx  *Identity
		want string
	}{
		{"a verified identity in the context wins", map[string]string{"X-User-ID": "bob"}, &Identity{Key: "alice"}, "user:alice"},
		{"the user header", map[string]string{"X-User-ID": "bob", "X-API-Key": "k1"}, nil, "user:bob"},
		{"an API key is hashed", map[string]string{"X-API-Key": "k1"}, nil, "apikey:b4d5ad8f0e9b2e80"},
		{"nothing keys by IP", nil, nil, "ip:192.0.2.1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRequest("GET", "/", "192.0.2.1:1")
			for k, v := range c.hdr {
				r.Header.Set(k, v)
			}
			if c.ctx != nil {
				r = r.WithContext(WithIdentity(context.Background(), *c.ctx))
			}
			h.ServeHTTP(newRecorder(), r)
			got := clientOf(lastKey(t, rec))
			if c.name == "an API key is hashed" {
				if len(got) != len("apikey:")+16 || got[:7] != "apikey:" || got == "apikey:k1" {
					t.Errorf("keyed by %q, want apikey: and 16 hex digits", got)
				}
				return
			}
			if got != c.want {
				t.Errorf("keyed by %q, want %q", got, c.want)
			}
		})
	}
}

func TestUnknownAPIKeysAreIgnoredByDefault(t *testing.T) {
	_, h, rec := setup(t, PolicyConfig{
		Tiers: []string{"free", "pro"}, DefaultTier: "free",
		Classes:  []Class{{Name: "default", Limits: map[string]limiter.Limit{"free": DefaultLimit()}}},
		Identity: IdentityConfig{APIKeyHeaders: []string{"X-API-Key"}, TierByAPIKey: map[string]string{"good-key": "pro"}},
	}, newClock())
	do(h, "GET", "/", "192.0.2.1:1", map[string]string{"X-API-Key": "invented"})
	if got := clientOf(lastKey(t, rec)); got != "ip:192.0.2.1" {
		t.Errorf("invented key: keyed by %q, want ip:192.0.2.1", got)
	}
	do(h, "GET", "/", "192.0.2.1:1", map[string]string{"X-API-Key": "good-key"})
	all := rec.all()
	if last := all[len(all)-1]; clientOf(last.Key)[:7] != "apikey:" || last.PlanTier != "pro" {
		t.Errorf("known key: keyed by %q on tier %q, want an apikey on pro", last.Key, last.PlanTier)
	}
	_ = http.StatusOK
}

func TestAHugeUserIDIsHashedIntoABoundedKeyThatStillSeparatesClients(t *testing.T) {
	_, h, rec := setup(t, PolicyConfig{
		Classes:  []Class{oneClass("default", limiter.PerMinute(limiter.FixedWindow, 1))},
		Identity: IdentityConfig{UserHeader: "X-User-ID", TrustedHeaderPeers: testGateway},
	}, newClock())
	long := strings.Repeat("u", 60_000)
	keys := map[string]bool{}
	for _, user := range []string{long + "1", long + "2"} {
		if w := do(h, "GET", "/", "192.0.2.1:1", map[string]string{"X-User-ID": user}); w.Code != 200 {
			t.Errorf("first request of a long user id: status %d, want 200 (each id its own budget)", w.Code)
		}
		got := clientOf(lastKey(t, rec))
		if len(got) > len("user:")+MaxUserKey || !strings.HasPrefix(got, "user:sha256:") {
			t.Errorf("a %d-byte user id keyed by %q (%d bytes), want user:sha256:<hash>", len(user), got[:min(len(got), 40)], len(got))
		}
		keys[got] = true
		if w := do(h, "GET", "/", "192.0.2.1:1", map[string]string{"X-User-ID": user}); w.Code != 429 {
			t.Errorf("second request of the same long user id: status %d, want 429 (the same key)", w.Code)
		}
	}
	if len(keys) != 2 {
		t.Errorf("two long user ids got %d keys, want 2", len(keys))
	}
	exact := strings.Repeat("v", MaxUserKey)
	do(h, "GET", "/", "192.0.2.1:1", map[string]string{"X-User-ID": exact})
	if got := clientOf(lastKey(t, rec)); got != "user:"+exact {
		t.Errorf("a user id of exactly %d bytes is kept verbatim, got %q", MaxUserKey, got[:min(len(got), 40)])
	}
}

// headerTrustPolicy is a free/pro policy behind a gateway at 10.0.0.0/8
// (and fd00::/8) that sets X-User-ID and X-Plan-Tier, with a load balancer
// at 172.16.0.0/12 trusted only with X-Forwarded-For.
func headerTrustPolicy(t *testing.T, clk *fakeClock, secret []byte) (http.Handler, *records) {
	t.Helper()
	_, h, rec := setup(t, PolicyConfig{
		Tiers: []string{"free", "pro"}, DefaultTier: "free",
		Classes: []Class{{Name: "api", Limits: map[string]limiter.Limit{
			"free": limiter.PerMinute(limiter.FixedWindow, 2),
			"pro":  limiter.PerMinute(limiter.FixedWindow, 10),
		}}},
		Identity: IdentityConfig{
			TrustedHeaderPeers: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")},
			TrustedProxies:     []netip.Prefix{netip.MustParsePrefix("172.16.0.0/12")},
			UserHeader:         "X-User-ID",
			TierHeader:         "X-Plan-Tier",
			APIKeyHeaders:      []string{"X-API-Key"},
			JWT:                &JWTConfig{Algorithm: "HS256", Secret: secret, Now: clk.Now},
			// Any API key is an identity here, to show what each peer's is worth.
			AllowUnknownAPIKeys: true,
			TierByKey:           map[string]string{"carol": "pro"},
			TierByAPIKey:        map[string]string{"pro-key": "pro"},
		},
	}, clk)
	return h, rec
}

func TestUserAndTierHeadersAreBelievedOnlyFromTrustedHeaderPeers(t *testing.T) {
	clk := newClock()
	secret := []byte("s3cret-for-tests")
	h, rec := headerTrustPolicy(t, clk, secret)
	token := sign(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "dave", "exp": clk.Now().Add(time.Hour).Unix()})
	cases := []struct {
		name     string
		remote   string
		hdr      map[string]string
		ctx      *Identity
		wantKey  string
		wantTier string
	}{
		{"an untrusted peer forging X-User-ID is keyed by its own address",
			"203.0.113.7:4000", map[string]string{"X-User-ID": "victim"}, nil, "ip:203.0.113.7", "free"},
		{"an untrusted peer forging X-Plan-Tier stays on the default tier",
			"203.0.113.7:4000", map[string]string{"X-Plan-Tier": "pro"}, nil, "ip:203.0.113.7", "free"},
		{"an untrusted peer naming a pro user in X-User-ID gets neither the user nor its tier",
			"203.0.113.7:4000", map[string]string{"X-User-ID": "carol"}, nil, "ip:203.0.113.7", "free"},
		{"the trusted gateway's X-User-ID and X-Plan-Tier are believed",
			"10.1.2.3:4000", map[string]string{"X-User-ID": "alice", "X-Plan-Tier": "pro"}, nil, "user:alice", "pro"},
		{"the trusted gateway's user gets its tier from the key to tier lookup",
			"10.1.2.3:4000", map[string]string{"X-User-ID": "carol"}, nil, "user:carol", "pro"},
		{"a gateway reached over IPv6 is trusted",
			"[fd00::1]:4000", map[string]string{"X-User-ID": "alice", "X-Plan-Tier": "pro"}, nil, "user:alice", "pro"},
		{"a gateway address mapped into IPv6 is trusted",
			"[::ffff:10.1.2.3]:4000", map[string]string{"X-User-ID": "alice"}, nil, "user:alice", "free"},
		{"a trusted proxy is believed about the address but not about the user",
			"172.16.0.1:4000", map[string]string{"X-Forwarded-For": "198.51.100.1", "X-User-ID": "victim", "X-Plan-Tier": "pro"}, nil, "ip:198.51.100.1", "free"},
		{"a forwarded address inside the gateway's network does not make the headers trusted",
			"172.16.0.1:4000", map[string]string{"X-Forwarded-For": "10.1.2.3", "X-User-ID": "victim"}, nil, "ip:10.1.2.3", "free"},
		{"an untrusted peer's API key still keys it, on the default tier despite X-Plan-Tier",
			"203.0.113.7:4000", map[string]string{"X-API-Key": "some-key", "X-User-ID": "victim", "X-Plan-Tier": "pro"}, nil, "apikey:", "free"},
		{"an untrusted peer's known API key gets its tier from the lookup",
			"203.0.113.7:4000", map[string]string{"X-API-Key": "pro-key"}, nil, "apikey:", "pro"},
		{"an untrusted peer's verified JWT keys by sub, on the default tier despite X-Plan-Tier",
			"203.0.113.7:4000", map[string]string{"Authorization": "Bearer " + token, "X-Plan-Tier": "pro"}, nil, "user:dave", "free"},
		{"the trusted gateway's X-Plan-Tier applies to a verified JWT",
			"10.1.2.3:4000", map[string]string{"Authorization": "Bearer " + token, "X-Plan-Tier": "pro"}, nil, "user:dave", "pro"},
		{"an untrusted peer's X-Plan-Tier does not override a context identity's tier",
			"203.0.113.7:4000", map[string]string{"X-Plan-Tier": "pro"}, &Identity{Key: "erin", Tier: "free"}, "user:erin", "free"},
		{"a peer that is not an IP address is not trusted",
			"@", map[string]string{"X-User-ID": "victim"}, nil, "ip:invalid IP", "free"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRequest("GET", "/x", c.remote)
			for k, v := range c.hdr {
				r.Header.Set(k, v)
			}
			if c.ctx != nil {
				r = r.WithContext(WithIdentity(context.Background(), *c.ctx))
			}
			h.ServeHTTP(newRecorder(), r)
			all := rec.all()
			last := all[len(all)-1]
			got := clientOf(last.Key)
			if c.wantKey == "apikey:" {
				if !strings.HasPrefix(got, "apikey:") {
					t.Errorf("keyed by %q, want the API key's hash", got)
				}
			} else if got != c.wantKey {
				t.Errorf("keyed by %q, want %q", got, c.wantKey)
			}
			if last.PlanTier != c.wantTier {
				t.Errorf("tier %q, want %q", last.PlanTier, c.wantTier)
			}
		})
	}
}

func TestAForgedUserHeaderNeitherSpendsAnotherUsersBudgetNorEscapesItsOwn(t *testing.T) {
	h, _ := headerTrustPolicy(t, newClock(), []byte("s3cret-for-tests"))
	attacker := "203.0.113.7:4000"
	// The attacker sends a different X-User-ID and X-Plan-Tier: pro each
	// time, naming the victim first: it stays one free client of 2 a minute.
	var codes []int
	for i, user := range []string{"victim", "u1", "u2", "u3"} {
		w := do(h, "GET", "/x", attacker, map[string]string{"X-User-ID": user, "X-Plan-Tier": "pro"})
		codes = append(codes, w.Code)
		if got := w.Header().Get("X-RateLimit-Limit"); got != "2" {
			t.Errorf("request %d: X-RateLimit-Limit %q, want the free limit 2", i+1, got)
		}
	}
	if codes[0] != 200 || codes[1] != 200 || codes[2] != 429 || codes[3] != 429 {
		t.Errorf("attacker statuses %v, want [200 200 429 429]", codes)
	}
	// The victim, through the gateway, still has its whole budget.
	for i := 1; i <= 2; i++ {
		w := do(h, "GET", "/x", "10.1.2.3:4000", map[string]string{"X-User-ID": "victim"})
		if w.Code != 200 || w.Header().Get("X-RateLimit-Remaining") != fmt.Sprint(2-i) {
			t.Errorf("victim request %d: status %d, remaining %q; want 200 and %d", i, w.Code, w.Header().Get("X-RateLimit-Remaining"), 2-i)
		}
	}
}

func TestAUserOrTierHeaderWithoutTrustedHeaderPeersIsRefused(t *testing.T) {
	store := limiter.NewMemoryStore(limiter.MemoryConfig{})
	cases := []struct {
		name string
		id   IdentityConfig
		want string
	}{
		{"a user header that no peer may send", IdentityConfig{UserHeader: "X-User-ID"}, "UserHeader X-User-ID"},
		{"a tier header that no peer may send", IdentityConfig{TierHeader: "X-Plan-Tier"}, "TierHeader X-Plan-Tier"},
		{"a user header with trusted proxies only",
			IdentityConfig{UserHeader: "X-User-ID", TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}, "TrustedHeaderPeers"},
		{"an invalid trusted header peer", IdentityConfig{TrustedHeaderPeers: []netip.Prefix{{}}}, "trusted header peer"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := NewPolicy(PolicyConfig{Store: store, Identity: c.id})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("NewPolicy: %v, want an error naming %q", err, c.want)
			}
		})
	}
}

// behindALoadBalancer is a policy of 2 a minute behind a load balancer at
// 10.0.0.0/8 that appends X-Forwarded-For and passes any other header
// through, as load balancers do.
func behindALoadBalancer(t *testing.T, id IdentityConfig, store limiter.Store) (http.Handler, *records) {
	t.Helper()
	id.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	_, h, rec := setup(t, PolicyConfig{
		Store:    store,
		Classes:  []Class{oneClass("default", limiter.PerMinute(limiter.FixedWindow, 2))},
		Identity: id,
	}, newClock())
	return h, rec
}

// viaLB sends a request through the load balancer at 10.1.2.3 from client,
// the address the load balancer appends to X-Forwarded-For, with the
// client's own extra headers.
func viaLB(h http.Handler, client string, hdr map[string]string) *httptest.ResponseRecorder {
	all := map[string]string{"X-Forwarded-For": client}
	for k, v := range hdr {
		all[k] = v
	}
	return do(h, "GET", "/", "10.1.2.3:4000", all)
}

func TestAClientsForwardedHeaderPicksNoKeyBehindALoadBalancer(t *testing.T) {
	t.Run("a new for= on every request buys no fresh budget", func(t *testing.T) {
		h, rec := behindALoadBalancer(t, IdentityConfig{}, nil)
		var codes []int
		for i := 0; i < 5; i++ {
			w := viaLB(h, "203.0.113.50", map[string]string{"Forwarded": fmt.Sprintf("for=198.51.100.%d", i+1)})
			codes = append(codes, w.Code)
			if got := clientOf(lastKey(t, rec)); got != "ip:203.0.113.50" {
				t.Errorf("request %d keyed by %q, want ip:203.0.113.50, the address the load balancer saw", i+1, got)
			}
		}
		if fmt.Sprint(codes) != "[200 200 429 429 429]" {
			t.Errorf("statuses %v, want [200 200 429 429 429]: one client, one budget of 2", codes)
		}
	})
	t.Run("for=<victim> spends the attacker's budget, not the victim's", func(t *testing.T) {
		h, _ := behindALoadBalancer(t, IdentityConfig{}, nil)
		for i := 0; i < 3; i++ {
			viaLB(h, "203.0.113.50", map[string]string{"Forwarded": "for=198.51.100.99"})
		}
		w := viaLB(h, "198.51.100.99", nil)
		if w.Code != 200 || w.Header().Get("X-RateLimit-Remaining") != "1" {
			t.Errorf("the victim's first request: status %d, remaining %q; want 200 and 1: its budget untouched", w.Code, w.Header().Get("X-RateLimit-Remaining"))
		}
	})
	t.Run("for=unknown, for=_hidden or no for= keep each client in its own bucket", func(t *testing.T) {
		h, rec := behindALoadBalancer(t, IdentityConfig{}, nil)
		for i, fwd := range []string{"for=unknown", "for=_hidden", "proto=https", `for="_x";by=10.1.2.3`} {
			client := fmt.Sprintf("203.0.113.%d", 60+i)
			for j := 0; j < 2; j++ {
				if w := viaLB(h, client, map[string]string{"Forwarded": fwd}); w.Code != 200 {
					t.Errorf("Forwarded: %s from %s, request %d: status %d, want 200: a bucket of its own", fwd, client, j+1, w.Code)
				}
			}
			if got := clientOf(lastKey(t, rec)); got != "ip:"+client {
				t.Errorf("Forwarded: %s keyed by %q, want ip:%s", fwd, got, client)
			}
		}
		// The load balancer's own requests (health checks) are untouched.
		w := do(h, "GET", "/", "10.1.2.3:4000", nil)
		if w.Code != 200 || w.Header().Get("X-RateLimit-Remaining") != "1" {
			t.Errorf("the load balancer's own request: status %d, remaining %q; want 200 and 1", w.Code, w.Header().Get("X-RateLimit-Remaining"))
		}
	})
}

func TestIPv6ClientsAreKeyedByTheirSlash64(t *testing.T) {
	t.Run("five addresses of one /64 share one budget", func(t *testing.T) {
		h, rec := behindALoadBalancer(t, IdentityConfig{}, nil)
		var codes []int
		for i := 1; i <= 5; i++ {
			codes = append(codes, viaLB(h, fmt.Sprintf("2001:db8:1:2::%x", i*0x1111), nil).Code)
			if got := clientOf(lastKey(t, rec)); got != "ip:2001:db8:1:2::/64" {
				t.Errorf("address %d keyed by %q, want ip:2001:db8:1:2::/64", i, got)
			}
		}
		if fmt.Sprint(codes) != "[200 200 429 429 429]" {
			t.Errorf("statuses %v, want [200 200 429 429 429]: one /64, one budget", codes)
		}
		if w := viaLB(h, "2001:db8:1:3::1", nil); w.Code != 200 {
			t.Errorf("the next /64: status %d, want 200: a budget of its own", w.Code)
		}
	})
	t.Run("zoned forms of an address are one key", func(t *testing.T) {
		_, h, rec := setup(t, PolicyConfig{Classes: []Class{oneClass("default", limiter.PerMinute(limiter.FixedWindow, 2))}}, newClock())
		var codes []int
		for _, remote := range []string{"[fe80::1%a]:4000", "[fe80::1%b]:4000", "[fe80::1]:4000"} {
			codes = append(codes, do(h, "GET", "/", remote, nil).Code)
			if got := clientOf(lastKey(t, rec)); got != "ip:fe80::/64" {
				t.Errorf("%s keyed by %q, want ip:fe80::/64", remote, got)
			}
		}
		if fmt.Sprint(codes) != "[200 200 429]" {
			t.Errorf("statuses %v, want [200 200 429]", codes)
		}
	})
	t.Run("a flood from one /64 does not evict other clients' spent budgets", func(t *testing.T) {
		clk := newClock()
		store := limiter.NewMemoryStore(limiter.MemoryConfig{Now: clk.Now, Shards: 1, MaxKeys: 8})
		h, _ := behindALoadBalancer(t, IdentityConfig{}, store)
		for i := 0; i < 2; i++ {
			viaLB(h, "198.51.100.7", nil)
		}
		if w := viaLB(h, "198.51.100.7", nil); w.Code != 429 {
			t.Fatalf("198.51.100.7 after its budget: status %d, want 429", w.Code)
		}
		for i := 0; i < 200; i++ {
			viaLB(h, fmt.Sprintf("2001:db8:1:2::%x", i+1), nil)
		}
		if w := viaLB(h, "198.51.100.7", nil); w.Code != 429 {
			t.Errorf("198.51.100.7 after a flood of 200 addresses of one /64: status %d, want 429: its spent budget kept", w.Code)
		}
	})
}

func TestTheClientAddressComesFromTheOneConfiguredHeader(t *testing.T) {
	lb := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}
	cases := []struct {
		name   string
		id     IdentityConfig
		remote string
		hdr    map[string][]string
		want   string
	}{
		{"Forwarded, when configured, understands IPv6 with a port",
			IdentityConfig{ClientIPHeader: "Forwarded"}, "[fd00::1]:4000",
			map[string][]string{"Forwarded": {`for="[2001:db8::17]:4711";proto=https`}, "X-Forwarded-For": {"198.51.100.1"}}, "ip:2001:db8::/64"},
		{"Forwarded, when configured, is walked from the right past trusted proxies",
			IdentityConfig{ClientIPHeader: "forwarded"}, "10.1.2.3:4000",
			map[string][]string{"Forwarded": {"for=1.1.1.1", "for=198.51.100.1;proto=http, for=10.9.9.9"}}, "ip:198.51.100.1"},
		{"Forwarded, when configured, falls back to the peer on for=_hidden",
			IdentityConfig{ClientIPHeader: "Forwarded"}, "10.1.2.3:4000",
			map[string][]string{"Forwarded": {"for=198.51.100.1, for=_hidden, for=10.9.9.9"}}, "ip:10.1.2.3"},
		{"X-Forwarded-For is not read when Forwarded is configured",
			IdentityConfig{ClientIPHeader: "Forwarded"}, "10.1.2.3:4000",
			map[string][]string{"X-Forwarded-For": {"198.51.100.1"}}, "ip:10.1.2.3"},
		{"X-Real-IP from a trusted proxy is the client",
			IdentityConfig{ClientIPHeader: "X-Real-IP"}, "10.1.2.3:4000",
			map[string][]string{"X-Real-IP": {"198.51.100.1"}, "X-Forwarded-For": {"198.51.100.2"}, "Forwarded": {"for=198.51.100.3"}}, "ip:198.51.100.1"},
		{"X-Real-IP from an untrusted peer is ignored",
			IdentityConfig{ClientIPHeader: "X-Real-IP"}, "203.0.113.7:4000",
			map[string][]string{"X-Real-IP": {"198.51.100.1"}}, "ip:203.0.113.7"},
		{"X-Real-IP sent twice keys by the peer",
			IdentityConfig{ClientIPHeader: "X-Real-IP"}, "10.1.2.3:4000",
			map[string][]string{"X-Real-IP": {"198.51.100.1", "198.51.100.2"}}, "ip:10.1.2.3"},
		{"X-Real-IP holding a list keys by the peer",
			IdentityConfig{ClientIPHeader: "X-Real-IP"}, "10.1.2.3:4000",
			map[string][]string{"X-Real-IP": {"198.51.100.1, 198.51.100.2"}}, "ip:10.1.2.3"},
		{"X-Real-IP: unknown keys by the peer",
			IdentityConfig{ClientIPHeader: "X-Real-IP"}, "10.1.2.3:4000",
			map[string][]string{"X-Real-IP": {"unknown"}}, "ip:10.1.2.3"},
		{"a gateway's own header, in any case",
			IdentityConfig{ClientIPHeader: "cf-connecting-ip"}, "10.1.2.3:4000",
			map[string][]string{"Cf-Connecting-Ip": {"2001:db8:5:6::9"}, "X-Forwarded-For": {"198.51.100.2"}}, "ip:2001:db8:5:6::/64"},
		{"trusted_hops 1: the second address from the right, whatever the trusted networks",
			IdentityConfig{TrustedHops: 1}, "10.1.2.3:4000",
			map[string][]string{"X-Forwarded-For": {"1.1.1.1, 198.51.100.1, 172.31.0.9"}}, "ip:198.51.100.1"},
		{"trusted_hops 1 counts hops across repeated headers",
			IdentityConfig{TrustedHops: 1}, "10.1.2.3:4000",
			map[string][]string{"X-Forwarded-For": {"1.1.1.1, 198.51.100.1", "172.31.0.9"}}, "ip:198.51.100.1"},
		{"trusted_hops 2 skips two",
			IdentityConfig{TrustedHops: 2}, "10.1.2.3:4000",
			map[string][]string{"X-Forwarded-For": {"198.51.100.1, 10.9.9.9, 172.31.0.9"}}, "ip:198.51.100.1"},
		{"trusted_hops with fewer hops than it counts keys by the peer",
			IdentityConfig{TrustedHops: 2}, "10.1.2.3:4000",
			map[string][]string{"X-Forwarded-For": {"198.51.100.1, 172.31.0.9"}}, "ip:10.1.2.3"},
		{"trusted_hops: an unreadable client entry keys by the peer",
			IdentityConfig{TrustedHops: 1}, "10.1.2.3:4000",
			map[string][]string{"X-Forwarded-For": {"unknown, 172.31.0.9"}}, "ip:10.1.2.3"},
		{"trusted_hops counts Forwarded elements",
			IdentityConfig{ClientIPHeader: "Forwarded", TrustedHops: 1}, "10.1.2.3:4000",
			map[string][]string{"Forwarded": {"for=198.51.100.1, for=_cdn"}}, "ip:198.51.100.1"},
		{"every hop trusted: the leftmost, which the first proxy saw",
			IdentityConfig{}, "10.1.2.3:4000",
			map[string][]string{"X-Forwarded-For": {"10.7.7.7, 10.9.9.9"}}, "ip:10.7.7.7"},
		{"an empty entry keys by the peer, not by the hop to its left",
			IdentityConfig{}, "10.1.2.3:4000",
			map[string][]string{"X-Forwarded-For": {"198.51.100.1, , 10.9.9.9"}}, "ip:10.1.2.3"},
		{"ipv4_prefix 24 groups a /24",
			IdentityConfig{IPv4Prefix: 24}, "10.1.2.3:4000",
			map[string][]string{"X-Forwarded-For": {"198.51.100.77"}}, "ip:198.51.100.0/24"},
		{"ipv6_prefix 128 keys one address, as IPv4 is",
			IdentityConfig{IPv6Prefix: 128}, "10.1.2.3:4000",
			map[string][]string{"X-Forwarded-For": {"2001:db8::17"}}, "ip:2001:db8::17"},
		{"ipv6_prefix 48",
			IdentityConfig{IPv6Prefix: 48}, "10.1.2.3:4000",
			map[string][]string{"X-Forwarded-For": {"2001:db8:1:ffff::17"}}, "ip:2001:db8:1::/48"},
		{"an IPv4-mapped IPv6 address is IPv4",
			IdentityConfig{}, "10.1.2.3:4000",
			map[string][]string{"X-Forwarded-For": {"::ffff:198.51.100.1"}}, "ip:198.51.100.1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			id := c.id
			id.TrustedProxies = lb
			_, h, rec := setup(t, PolicyConfig{Identity: id}, newClock())
			r := newRequest("GET", "/", c.remote)
			for k, vs := range c.hdr {
				for _, v := range vs {
					r.Header.Add(k, v)
				}
			}
			h.ServeHTTP(newRecorder(), r)
			if got := clientOf(lastKey(t, rec)); got != c.want {
				t.Errorf("keyed by %q, want %q", got, c.want)
			}
		})
	}
}

func TestBadClientAddressSettingsAreRefused(t *testing.T) {
	store := limiter.NewMemoryStore(limiter.MemoryConfig{})
	lb := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	cases := []struct {
		name string
		id   IdentityConfig
		want string
	}{
		{"a header name with a space", IdentityConfig{TrustedProxies: lb, ClientIPHeader: "X Real IP"}, `ClientIPHeader "X Real IP" is not a header name`},
		{"a header name with a colon", IdentityConfig{TrustedProxies: lb, ClientIPHeader: "X-Real-IP:"}, "is not a header name"},
		{"negative trusted hops", IdentityConfig{TrustedProxies: lb, TrustedHops: -1}, "TrustedHops -1: must be 0 or more"},
		{"trusted hops of a one-address header", IdentityConfig{TrustedProxies: lb, ClientIPHeader: "X-Real-IP", TrustedHops: 1}, "holds one address"},
		{"a client address header no peer may send", IdentityConfig{ClientIPHeader: "X-Real-IP"}, "TrustedProxies, which is empty"},
		{"trusted hops no peer may send", IdentityConfig{TrustedHops: 1}, "TrustedProxies, which is empty"},
		{"an IPv4 prefix too short", IdentityConfig{IPv4Prefix: 8}, "IPv4Prefix 8: must be 16 to 32"},
		{"an IPv4 prefix too long", IdentityConfig{IPv4Prefix: 33}, "IPv4Prefix 33"},
		{"an IPv6 prefix too short", IdentityConfig{IPv6Prefix: 16}, "IPv6Prefix 16: must be 32 to 128"},
		{"an IPv6 prefix too long", IdentityConfig{IPv6Prefix: 129}, "IPv6Prefix 129"},
		{"a negative prefix", IdentityConfig{IPv6Prefix: -64}, "IPv6Prefix -64"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := NewPolicy(PolicyConfig{Store: store, Identity: c.id})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("NewPolicy: %v, want an error saying %q", err, c.want)
			}
		})
	}
}

func TestTheDecisionAPIAndResetGroupAnAddressKeyAsTheMiddlewareDoes(t *testing.T) {
	m, h, _ := setup(t, PolicyConfig{Classes: []Class{oneClass("default", limiter.PerMinute(limiter.FixedWindow, 2))}}, newClock())
	api := m.CheckHandler()
	// The proxy path spends the budget of 2001:db8:1:2::1's /64.
	for i := 0; i < 2; i++ {
		do(h, "GET", "/", "[2001:db8:1:2::1]:4000", nil)
	}
	if w := postCheck(api, "", `{"key":"ip:2001:db8:1:2::77","endpoint":"GET /"}`); w.Code != 429 {
		t.Errorf("the decision API for another address of the /64: %d %s, want 429: the budget the proxy spent", w.Code, w.Body)
	}
	if w := postCheck(api, "", `{"key":"ip:2001:db8:1:3::1","endpoint":"GET /"}`); w.Code != 200 {
		t.Errorf("the decision API for the next /64: %d %s, want 200", w.Code, w.Body)
	}
	if _, err := m.ResetClient(context.Background(), "ip:2001:db8:1:2::ffff", ""); err != nil {
		t.Fatal(err)
	}
	if w := do(h, "GET", "/", "[2001:db8:1:2::1]:4000", nil); w.Code != 200 {
		t.Errorf("after a reset of another address of the /64: status %d, want 200: the /64's budget given back", w.Code)
	}
	if w := postCheck(api, "", `{"key":"ip:2001:db8:1:2::/64","endpoint":"GET /"}`); w.Code != 200 || w.Header().Get("X-RateLimit-Remaining") != "0" {
		t.Errorf("the decision API for the /64's key as the proxy names it: %d, remaining %q; want 200 and 0: the same budget", w.Code, w.Header().Get("X-RateLimit-Remaining"))
	}
	// Keys that are not one address are the caller's, as they are.
	for _, key := range []string{"ip:2001:db8:9:9::/64", "ip:not-an-address", "user:2001:db8:1:2::1"} {
		for i, want := range []int{200, 200, 429} {
			if w := postCheck(api, "", fmt.Sprintf(`{"key":%q,"endpoint":"GET /x"}`, key)); w.Code != want {
				t.Errorf("key %s, check %d: %d, want %d", key, i+1, w.Code, want)
			}
		}
	}
}
