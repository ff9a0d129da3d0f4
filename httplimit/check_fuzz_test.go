package httplimit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// FuzzCheckBody posts any body to the decision API. Whatever the body, the
// answer is JSON with one of the statuses the API documents for a healthy
// store (200, 429, 400, 413), never a panic or a 5xx; a body over
// MaxCheckBody is a 413 and only such a body is; a body that is not one
// strict JSON check request is refused; and an accepted one was a request
// the API can serve (key, endpoint, cost within the quota), answered with
// numbers that agree with each other and with the headers.
func FuzzCheckBody(f *testing.F) {
	clk := newClock()
	p, err := NewPolicy(PolicyConfig{
		Store: limiter.NewMemoryStore(limiter.MemoryConfig{Now: clk.Now}),
		Classes: []Class{
			oneClass("orders", limiter.PerMinute(limiter.FixedWindow, 3), "GET /api/v1/orders/{id}"),
			oneClass("other", limiter.PerMinute(limiter.TokenBucket, 100)),
		},
		DefaultClass: "other",
	})
	if err != nil {
		f.Fatal(err)
	}
	m, err := New(Config{Policy: p, Now: clk.Now})
	if err != nil {
		f.Fatal(err)
	}
	h := m.CheckHandler()

	for _, seed := range []string{
		`{"key":"alice","endpoint":"GET /api/v1/orders/42"}`,
		`{"key":"user:bob","endpoint":"/api/v1/orders/7","plan_tier":"default","cost":2}`,
		`{"key":"k","endpoint":"POST /x","cost":0}`,
		`{"key":"k","endpoint":"GET /x","cost":-9223372036854775808}`,
		`{"key":"k","endpoint":"GET /x","cost":101}`,
		`{"key":"","endpoint":"GET /x"}`,
		`{"key":"k","endpoint":"GET x"}`,
		`{"key":"k","endpoint":"G(T /x"}`,
		`{"key":"k","endpoint":"GET /%zz"}`,
		`{"key":"k","endpoint":"GET /x","extra":1}`,
		`{"key":"k","endpoint":"GET /x"} {}`,
		`{"KEY":"k","Endpoint":"GET /x"}`,
		`{"key":"k","endpoint":"GET /x","cost":1.5}`,
		`{"key":"k","key":"","endpoint":"GET /x"}`,
		`[]`,
		`null`,
		``,
		`{"key":"` + strings.Repeat("a", 513) + `","endpoint":"GET /x"}`,
		`{"key":"` + strings.Repeat("a", MaxCheckBody) + `","endpoint":"GET /x"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, CheckPath, bytes.NewReader(body)))
		if ct := w.Header().Get("Content-Type"); ct != "application/json" {
			t.Fatalf("body %q: Content-Type %q, want application/json", body, ct)
		}
		if !json.Valid(w.Body.Bytes()) {
			t.Fatalf("body %q: answer %q is not JSON", body, w.Body.Bytes())
		}
		if tooBig := len(body) > MaxCheckBody; tooBig != (w.Code == http.StatusRequestEntityTooLarge) {
			t.Fatalf("body of %d bytes (limit %d): status %d", len(body), MaxCheckBody, w.Code)
		}
		req, strictErr := decodeStrictly(body)
		switch w.Code {
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
			var rb RejectedBody
			if err := json.Unmarshal(w.Body.Bytes(), &rb); err != nil || rb.Error != "bad_request" || rb.Message == "" {
				t.Fatalf("body %q: %d answer %q: want error bad_request and a message", body, w.Code, w.Body.Bytes())
			}
			return
		case http.StatusOK, http.StatusTooManyRequests:
		default:
			t.Fatalf("body %q: status %d, want 200, 429, 400 or 413", body, w.Code)
		}

		// Accepted: the body was a strict check request the API can serve.
		if strictErr != nil {
			t.Fatalf("body %q accepted (%d) though it is not a strict JSON check request: %v", body, w.Code, strictErr)
		}
		if req.Key == "" || len(req.Key) > 512 || strings.TrimSpace(req.Endpoint) == "" {
			t.Fatalf("body %q accepted (%d) with key %q and endpoint %q", body, w.Code, req.Key, req.Endpoint)
		}
		var resp CheckResponse
		if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil {
			t.Fatalf("body %q: answer %q is not a CheckResponse: %v", body, w.Body.Bytes(), err)
		}
		if req.Cost != nil && (*req.Cost < 1 || *req.Cost > resp.Limit) {
			t.Fatalf("body %q accepted with cost %d outside 1..%d", body, *req.Cost, resp.Limit)
		}
		if resp.Allowed != (w.Code == http.StatusOK) || resp.Limit < 1 || resp.Remaining < 0 || resp.Remaining > resp.Limit || resp.Reset < 0 || resp.DelayMS < 0 {
			t.Fatalf("body %q: status %d with answer %+v", body, w.Code, resp)
		}
		if (w.Code == http.StatusTooManyRequests) != (resp.RetryAfter >= 1) {
			t.Fatalf("body %q: status %d with retry_after %d", body, w.Code, resp.RetryAfter)
		}
		for name, want := range map[string]int64{"X-RateLimit-Limit": resp.Limit, "X-RateLimit-Remaining": resp.Remaining} {
			if got := w.Header().Get(name); got != strconv.FormatInt(want, 10) {
				t.Fatalf("body %q: %s %q but the answer says %d", body, name, got, want)
			}
		}
		clk.Advance(time.Second) // let budgets refill now and then
	})
}

// decodeStrictly is the check request as the API documents it: one JSON
// object with only the CheckRequest fields, and nothing after it but JSON
// whitespace.
func decodeStrictly(body []byte) (CheckRequest, error) {
	var req CheckRequest
	r := bytes.NewReader(body)
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return req, err
	}
	rest, _ := io.ReadAll(io.MultiReader(dec.Buffered(), r))
	if len(bytes.Trim(rest, " \t\r\n")) > 0 {
		return req, fmt.Errorf("%q after the JSON object", rest)
	}
	return req, nil
}
