package server_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rl-exporter/rl-exporter/decision"
	"github.com/rl-exporter/rl-exporter/server"
)

// upstreamAnswers are what the upstream answers on /answer/<i>.
var upstreamAnswers = []struct {
	name   string
	status int
	header http.Header
}{
	{"its own X-RateLimit-Remaining", 200, http.Header{"X-Ratelimit-Remaining": {"999"}, "X-Ratelimit-Limit": {"1000"}}},
	{"its own RateLimit fields", 200, http.Header{"Ratelimit": {`"up";r=5;t=1`}, "Ratelimit-Policy": {`"up";q=10;w=60`}}},
	{"duplicates", 200, http.Header{"X-Ratelimit-Remaining": {"7", "8"}, "Set-Cookie": {"a=1", "b=2"}, "X-Tag": {"x", "y"}}},
	{"no rate-limit header", 200, http.Header{"X-Other": {"kept"}}},
	{"its own 429", 429, http.Header{"X-Ratelimit-Remaining": {"0"}, "Retry-After": {"30"}, "Ratelimit": {`"up";r=0;t=30`}}},
	{"a 503 with Retry-After", 503, http.Header{"Retry-After": {"120"}, "X-Ratelimit-Reset": {"1"}}},
}

func TestBothProxyPathsMergeTheUpstreamsHeadersAlikeAndTheLimitersWin(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		i, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/answer/"))
		if err != nil || i >= len(upstreamAnswers) {
			http.NotFound(w, r)
			return
		}
		a := upstreamAnswers[i]
		for k, vv := range a.header {
			w.Header()[k] = vv
		}
		w.WriteHeader(a.status)
	}))
	defer up.Close()
	base := startProxy(t, up.URL, server.TransportConfig{})

	// visible is what the client sees of an answer: its status and its
	// headers but Date, each value of a rate-limit header that is not the
	// upstream's written "<limiter>" (the numbers move between requests).
	visible := func(t *testing.T, method, path, body string, upstream http.Header) (int, http.Header) {
		t.Helper()
		var rb io.Reader
		if body != "" {
			rb = strings.NewReader(body)
		}
		req, _ := http.NewRequest(method, base+path, rb)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		h := resp.Header.Clone()
		h.Del("Date")
		for _, k := range decision.HeaderNames {
			for j, v := range h[k] {
				if !slices.Contains(upstream[k], v) {
					h[k][j] = "<limiter>"
				}
			}
		}
		return resp.StatusCode, h
	}
	for i, a := range upstreamAnswers {
		path := "/answer/" + strconv.Itoa(i)
		for _, method := range []string{"GET", "POST"} {
			t.Run(method+" "+a.name, func(t *testing.T) {
				// Without a body the direct path, with one the ReverseProxy.
				dCode, direct := visible(t, method, path, "", a.header)
				rCode, proxied := visible(t, method, path, "body", a.header)
				if dCode != a.status || rCode != a.status {
					t.Fatalf("status %d on the direct path, %d through ReverseProxy; want the upstream's %d", dCode, rCode, a.status)
				}
				if !reflect.DeepEqual(direct, proxied) {
					t.Errorf("the client sees\n  %v\non the direct path and\n  %v\nthrough ReverseProxy", direct, proxied)
				}
				for _, k := range []string{"X-Ratelimit-Remaining", "X-Ratelimit-Limit", "X-Ratelimit-Reset", "Ratelimit", "Ratelimit-Policy"} {
					if got := direct[k]; !reflect.DeepEqual(got, []string{"<limiter>"}) {
						t.Errorf("%s %q, want the limiter's value alone", k, got)
					}
				}
				for _, k := range []string{"Retry-After", "Set-Cookie", "X-Tag", "X-Other"} {
					if want := a.header[k]; want != nil && !reflect.DeepEqual(direct[k], want) {
						t.Errorf("%s %q, want the upstream's %q (the limiter set none)", k, direct[k], want)
					}
				}
			})
		}
	}
}
