package httplimit

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// authSetup is a policy with an orders class of 2 per minute on GET /orders/{id} (and 1 per
// minute on api.example.com/admin/), the rest 100 per minute, 127.0.0.1 a trusted proxy.
func authSetup(t *testing.T) (*Middleware, http.Handler, *records) {
	t.Helper()
	m, _, rec := setup(t, PolicyConfig{
		Classes: []Class{
			oneClass("default", limiter.PerMinute(limiter.FixedWindow, 100)),
			oneClass("orders", limiter.PerMinute(limiter.FixedWindow, 2), "GET /orders/{id}"),
			oneClass("admin", limiter.PerMinute(limiter.FixedWindow, 1), "api.example.com/admin/"),
		},
		Identity: IdentityConfig{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}},
	}, newClock())
	return m, m.AuthHandler(), rec
}

// auth sends one forward-auth request as a gateway on 127.0.0.1 would.
func auth(h http.Handler, method, target string, hdr map[string]string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, target, nil)
	r.RemoteAddr = "127.0.0.1:5000"
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestForwardAuthReadsTheOriginalRequestOfEachGateway(t *testing.T) {
	gateways := []struct {
		name   string
		method string
		target string
		hdr    map[string]string
	}{
		{"nginx auth_request", "GET", AuthPath, map[string]string{
			"X-Original-URI": "/orders/42?page=2", "X-Original-Method": "GET", "X-Forwarded-For": "192.0.2.1"}},
		{"Caddy forward_auth", "GET", AuthPath, map[string]string{
			"X-Forwarded-Uri": "/orders/42", "X-Forwarded-Method": "GET", "X-Forwarded-Host": "shop.example.com",
			"X-Forwarded-Proto": "http", "X-Forwarded-For": "192.0.2.2"}},
		{"Traefik ForwardAuth", "GET", AuthPath, map[string]string{
			"X-Forwarded-Uri": "/orders/42?x=1", "X-Forwarded-Method": "GET", "X-Forwarded-Host": "shop.example.com",
			"X-Forwarded-Proto": "https", "X-Forwarded-For": "192.0.2.3"}},
		// ext_authz HTTP: the original method, path_prefix + path, Host, Content-Length: 0.
		{"Envoy ext_authz", "GET", AuthPath + "/orders/42?y=2", map[string]string{
			"X-Forwarded-For": "192.0.2.4", "Content-Length": "0", "X-Envoy-Expected-Rq-Timeout-Ms": "200"}},
	}
	for _, g := range gateways {
		t.Run(g.name, func(t *testing.T) {
			_, h, rec := authSetup(t)
			for i := 1; i <= 3; i++ {
				w := auth(h, g.method, g.target, g.hdr)
				want := http.StatusOK
				if i == 3 {
					want = http.StatusTooManyRequests
				}
				if w.Code != want {
					t.Fatalf("request %d: status %d, want %d: %s", i, w.Code, want, w.Body)
				}
				if w.Header().Get("RateLimit") == "" || w.Header().Get("X-RateLimit-Limit") != "2" {
					t.Errorf("request %d: headers %v, want RateLimit and X-RateLimit-Limit: 2 (the orders class)", i, w.Header())
				}
				if i == 3 {
					var body RejectedBody
					decodeJSON(t, w.Body.Bytes(), &body)
					if w.Header().Get("Retry-After") == "" || body.Error != "rate_limit_exceeded" || body.RetryAfter < 1 {
						t.Errorf("refusal: Retry-After %q, body %+v", w.Header().Get("Retry-After"), body)
					}
				} else if w.Body.Len() != 0 {
					t.Errorf("request %d: an allowed answer has body %q", i, w.Body)
				}
			}
			for _, r := range rec.all() {
				if r.Endpoint != "GET /orders/{id}" || !strings.HasSuffix(r.Key, "|ip:"+g.hdr["X-Forwarded-For"]) {
					t.Errorf("recorded %s for %s, want GET /orders/{id} for ip:%s", r.Endpoint, r.Key, g.hdr["X-Forwarded-For"])
				}
			}
		})
	}
}

func TestForwardAuthMatchesTheOriginalHostAndMethod(t *testing.T) {
	_, h, _ := authSetup(t)
	admin := func(hdr map[string]string) string {
		w := auth(h, "GET", AuthPath, hdr)
		return w.Header().Get("X-RateLimit-Limit")
	}
	if got := admin(map[string]string{"X-Forwarded-Uri": "/admin/users", "X-Forwarded-Host": "api.example.com"}); got != "1" {
		t.Errorf("X-Forwarded-Host api.example.com: limit %q, want the admin class's 1", got)
	}
	if got := admin(map[string]string{"X-Forwarded-Uri": "/admin/users", "X-Forwarded-Host": "www.example.com"}); got != "100" {
		t.Errorf("another host: limit %q, want the default class's 100", got)
	}
	// nginx keeps the Host of the client request when told to (proxy_set_header Host $host).
	w := httptest.NewRequest("GET", AuthPath, nil)
	w.Host = "api.example.com"
	w.RemoteAddr = "127.0.0.1:5000"
	w.Header.Set("X-Original-URI", "/admin/users")
	rr := httptest.NewRecorder()
	h.ServeHTTP(rr, w)
	if got := rr.Header().Get("X-RateLimit-Limit"); got != "1" {
		t.Errorf("X-Original-URI with Host api.example.com: limit %q, want 1", got)
	}
	if got := auth(h, "GET", AuthPath, map[string]string{"X-Original-URI": "/orders/42", "X-Original-Method": "POST"}).Header().Get("X-RateLimit-Limit"); got != "100" {
		t.Errorf("POST /orders/42: limit %q, want the default class's 100 (the orders route is GET)", got)
	}
	if got := auth(h, "GET", AuthPath, map[string]string{"X-Forwarded-Uri": "/orders/4%32?q=%20"}).Header().Get("X-RateLimit-Limit"); got != "2" {
		t.Errorf("an escaped /orders/4%%32: limit %q, want the orders class's 2", got)
	}
	if got := auth(h, "POST", AuthPath+"/orders/42", nil).Header().Get("X-RateLimit-Limit"); got != "100" {
		t.Errorf("Envoy POST /orders/42: limit %q, want 100", got)
	}
}

func TestForwardAuthDenialStatusCanBe403ForNginx(t *testing.T) {
	_, h, _ := authSetup(t)
	hdr := map[string]string{"X-Original-URI": "/orders/1", DenyStatusHeader: "403"}
	auth(h, "GET", AuthPath, hdr)
	auth(h, "GET", AuthPath, hdr)
	w := auth(h, "GET", AuthPath, hdr)
	if w.Code != http.StatusForbidden || w.Header().Get("Retry-After") == "" || w.Header().Get("RateLimit") == "" {
		t.Fatalf("refusal with %s: 403: status %d, headers %v; want 403 with Retry-After and RateLimit", DenyStatusHeader, w.Code, w.Header())
	}
	hdr[DenyStatusHeader] = "401"
	if w := auth(h, "GET", AuthPath, hdr); w.Code != http.StatusUnauthorized {
		t.Errorf("refusal with %s: 401: status %d", DenyStatusHeader, w.Code)
	}
	hdr[DenyStatusHeader] = "500"
	if w := auth(h, "GET", AuthPath, hdr); w.Code != http.StatusTooManyRequests || !strings.Contains(w.Body.String(), DenyStatusHeader) ||
		!strings.Contains(w.Body.String(), `"error":"bad_request"`) {
		t.Errorf("%s: 500: status %d %s, want the refusal 429, bad_request, naming the header", DenyStatusHeader, w.Code, w.Body)
	}
}

// A request /v1/auth cannot place is refused with the status the gateway passes on as a
// refusal, never a 400: nginx's auth_request takes any status but 2xx, 401 and 403 as the
// limiter's failure, which the example lets through unchecked.
func TestForwardAuthRefusesRequestsItCannotPlaceWithTheGatewaysDenyStatus(t *testing.T) {
	m, h, rec := authSetup(t)
	cases := []struct {
		name string
		hdr  map[string]string
		want string
	}{
		{"no original request", nil, "X-Original-URI"},
		{"both families: a client's forged header beside the gateway's", map[string]string{
			"X-Original-URI": "/orders/1", "X-Forwarded-Uri": "/cheap"}, "both"},
		{"a URI that is no path", map[string]string{"X-Forwarded-Uri": "orders"}, "X-Forwarded-Uri"},
		{"a bad escape", map[string]string{"X-Original-URI": "/orders/%zz"}, "X-Original-Uri"},
		{"a method that is no token", map[string]string{"X-Original-URI": "/orders/1", "X-Original-Method": "GE T"}, "X-Original-Method"},
	}
	refused := 0
	for _, c := range cases {
		for _, deny := range []string{"403", ""} {
			hdr := map[string]string{DenyStatusHeader: deny}
			for k, v := range c.hdr {
				hdr[k] = v
			}
			w := auth(h, "GET", AuthPath, hdr)
			want := map[string]int{"403": http.StatusForbidden, "": http.StatusTooManyRequests}[deny]
			refused++
			if w.Code != want || !strings.Contains(w.Body.String(), `"error":"bad_request"`) || !strings.Contains(w.Body.String(), c.want) ||
				w.Header().Get("Cache-Control") != "no-store" {
				t.Errorf("%s, %s %q: status %d %s, want %d bad_request naming %s", c.name, DenyStatusHeader, deny, w.Code, w.Body, want, c.want)
			}
		}
	}
	if n := len(rec.all()); n != 0 {
		t.Errorf("%d decisions recorded for requests refused as bad", n)
	}
	if got := m.AuthDenied(DenyBadRequest); got != uint64(refused) || refused < 10 {
		t.Errorf("AuthDenied(bad_request) %d, want the %d refused (at least 10)", got, refused)
	}
}

func TestForwardAuthKeysByTheGatewaysAddressHeaderOnlyFromATrustedGateway(t *testing.T) {
	_, h, rec := authSetup(t)
	r := httptest.NewRequest("GET", AuthPath, nil)
	r.RemoteAddr = "198.51.100.9:4000" // not a trusted proxy
	r.Header.Set("X-Original-URI", "/orders/1")
	r.Header.Set("X-Forwarded-For", "192.0.2.77")
	h.ServeHTTP(httptest.NewRecorder(), r)
	if got := rec.all(); len(got) != 1 || !strings.HasSuffix(got[0].Key, "|ip:198.51.100.9") {
		t.Errorf("records %+v, want one keyed by the untrusted peer 198.51.100.9", got)
	}
}
