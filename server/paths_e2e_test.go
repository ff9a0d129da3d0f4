package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// pathsConfig gives each class a limit of its own, so that X-RateLimit-Limit says which class
// decided a request.
const pathsConfig = `
classes:
  orders:
    routes: ["GET /api/v1/orders/{id}"]
    limits: {default: {algorithm: fixed_window, rate: 50, period: 1m}}
  admin:
    routes: ["/admin/"]
    limits: {default: {algorithm: fixed_window, rate: 20, period: 1m}}
  default:
    limits: {default: {algorithm: fixed_window, rate: 100, period: 1m}}
default_class: default
`

var classLimits = map[string]string{"orders": "50", "admin": "20", "default": "100"}

// pathSeen is an upstream that answers with the request target it was sent.
func pathSeen(t *testing.T) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Upstream", "yes")
		fmt.Fprint(w, r.RequestURI)
	}))
	t.Cleanup(s.Close)
	return s
}

// A path is read as the upstream reads it: the class is the one of the path the upstream is sent,
// through the proxy, /v1/auth (nginx's X-Original-URI and Envoy's path under /v1/auth) and
// /v1/check alike; an encoded slash is refused by default, with 400 on the proxy and the
// gateway's deny status on /v1/auth.
func TestEveryWayInChoosesTheClassOfThePathTheUpstreamReads(t *testing.T) {
	type want struct {
		class string // "" : refused as a bad path
		sent  string // what the upstream is sent (proxy)
	}
	cases := []struct {
		path  string
		paths string // server.paths
		want  want
	}{
		{"/api/v1/orders/1", "", want{"orders", "/api/v1/orders/1"}},
		{"/api%2Fv1%2Forders%2F1", "", want{"", ""}},
		{"/x/..%2Fadmin/y", "", want{"", ""}},
		{"/api%5Cv1/orders/1", "", want{"", ""}},
		{"/API/v1/orders/1", "", want{"default", "/API/v1/orders/1"}},
		{"/api/v1/orders/1/", "", want{"orders", "/api/v1/orders/1/"}},
		{"/x/../api/v1/orders/1", "", want{"orders", "/api/v1/orders/1"}},
		{"/api/v1/./orders/1", "", want{"orders", "/api/v1/orders/1"}},
		{"//api//v1/orders//1", "", want{"orders", "/api/v1/orders/1"}},
		{"/api/v1/orders/1/%2e%2e/%2E%2E/%2e%2e/%2e%2e/admin/y", "", want{"admin", "/admin/y"}},
		{"/../../admin/y", "", want{"admin", "/admin/y"}},
		{"/%61pi/v1/orders/1", "", want{"orders", "/api/v1/orders/1"}},
		{"/api%2Fv1%2Forders%2F1", "{escaped_slashes: decode}", want{"orders", "/api/v1/orders/1"}},
		{"/x/..%2Fadmin/y", "{escaped_slashes: decode}", want{"admin", "/admin/y"}},
		{"/api%2Fv1%2Forders%2F1", "{escaped_slashes: keep}", want{"default", "/api%2Fv1%2Forders%2F1"}},
		{"/x/..%2Fadmin/y", "{escaped_slashes: keep}", want{"default", "/x/..%2Fadmin/y"}},
		{"/API/v1/orders/1", "{case: insensitive}", want{"orders", "/API/v1/orders/1"}},
		{"/Admin/y", "{case: insensitive}", want{"admin", "/Admin/y"}},
		{"/api/v1/orders/1/", "{trailing_slash: strict}", want{"default", "/api/v1/orders/1/"}},
		{"/admin/", "", want{"admin", "/admin/"}},
	}
	byConfig := map[string]*proc{}
	up := pathSeen(t)
	for _, c := range cases {
		p := byConfig[c.paths]
		if p == nil {
			cfg := pathsConfig
			if c.paths != "" {
				cfg += "server: {paths: " + c.paths + "}\n"
			}
			p = startServe(t, []string{"main"}, "--config", writeConfig(t, cfg), "--upstream", up.URL)
			byConfig[c.paths] = p
		}
		name := c.path
		if c.paths != "" {
			name += " with paths " + c.paths
		}
		t.Run(name, func(t *testing.T) {
			client := fromAddr("127.0.0.1")
			code, hdr, body := sendFrom(t, client, "GET", p.url("main", c.path), "", nil)
			switch {
			case c.want.class == "":
				if code != http.StatusBadRequest || hdr.Get("X-Upstream") != "" || !strings.Contains(body, `"bad_path"`) {
					t.Errorf("proxy: status %d, X-Upstream %q, body %s; want 400 bad_path, the upstream never asked", code, hdr.Get("X-Upstream"), body)
				}
			case code != 200 || body != c.want.sent || hdr.Get("X-RateLimit-Limit") != classLimits[c.want.class]:
				t.Errorf("proxy: status %d, upstream sent %q, X-RateLimit-Limit %q; want 200, %q, class %s's %s",
					code, body, hdr.Get("X-RateLimit-Limit"), c.want.sent, c.want.class, classLimits[c.want.class])
			}

			// Envoy sends no X-Deny-Status: its refusal is any forward-auth refusal's 429, which
			// Envoy passes on as a denial like any 4xx.
			for _, gw := range []struct {
				name, url string
				hdr       map[string]string
				deny      int
			}{
				{"nginx", p.url("main", "/v1/auth"), map[string]string{"X-Original-URI": c.path, "X-Original-Method": "GET", "X-Deny-Status": "403"}, http.StatusForbidden},
				{"Envoy", p.url("main", "/v1/auth"+c.path), nil, http.StatusTooManyRequests},
			} {
				code, hdr, body := sendFrom(t, client, "GET", gw.url, "", gw.hdr)
				switch {
				case c.want.class == "":
					if code != gw.deny || !strings.Contains(body, `"bad_path"`) {
						t.Errorf("/v1/auth (%s): status %d, body %s; want the deny status %d with bad_path", gw.name, code, body, gw.deny)
					}
				case code != 200 || hdr.Get("X-RateLimit-Limit") != classLimits[c.want.class]:
					t.Errorf("/v1/auth (%s): status %d %s, X-RateLimit-Limit %q; want 200 and class %s's %s",
						gw.name, code, body, hdr.Get("X-RateLimit-Limit"), c.want.class, classLimits[c.want.class])
				}
			}

			ep, _ := json.Marshal("GET " + c.path)
			code, _, body = postCheck(t, client, p.url("main", "/v1/check"), `{"key":"k","dry_run":true,"endpoint":`+string(ep)+`}`, nil)
			var got struct{ Class, Error, Message string }
			_ = json.Unmarshal([]byte(body), &got)
			switch {
			case c.want.class == "":
				if code != http.StatusBadRequest || !strings.Contains(body, "encoded slash") {
					t.Errorf("/v1/check: status %d, body %s; want 400 naming the encoded slash", code, body)
				}
			case code != 200 || got.Class != c.want.class:
				t.Errorf("/v1/check: status %d, body %s; want 200 and class %s", code, body, c.want.class)
			}
		})
	}
}

// Without X-Deny-Status a refused path still gets a status every gateway reads as a refusal,
// never one that takes its failure path.
// Without X-Deny-Status a refused path is answered as any forward-auth refusal is (429), so a
// gateway configured for the limit's refusals treats it as one.
func TestForwardAuthRefusesAnEncodedSlashWithTheDenyStatusAndCountsIt(t *testing.T) {
	p := startServe(t, []string{"main"}, "--config", writeConfig(t, pathsConfig))
	for _, deny := range []string{"", "401", "403"} {
		hdr := map[string]string{"X-Forwarded-Uri": "/api%2Fv1%2Forders%2F1", "X-Forwarded-Method": "GET"}
		want := http.StatusTooManyRequests
		if deny != "" {
			hdr["X-Deny-Status"] = deny
			want, _ = strconv.Atoi(deny)
		}
		code, _, body := sendFrom(t, fromAddr("127.0.0.1"), "GET", p.url("main", "/v1/auth"), "", hdr)
		if code != want || !strings.Contains(body, `"bad_path"`) {
			t.Errorf("X-Deny-Status %q: status %d, body %s; want %d bad_path", deny, code, body, want)
		}
	}
}
