package httplimit

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rl-exporter/rl-exporter/limiter"
)

func postJSON(t *testing.T, url, body string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s: %q is not JSON", url, b)
	}
	return resp.StatusCode, out
}

// A reserving check answers a token; committing it settles the reservation once, at the cost given.
func TestACheckReservesAndACommitSettlesItOnce(t *testing.T) {
	m, ev := costMiddleware(t, newClock(), "POST /v1/chat", CostFrom{JSON: "usage.total_tokens"}, 200)
	check := httptest.NewServer(m.CheckHandler())
	defer check.Close()
	commit := httptest.NewServer(m.CommitHandler())
	defer commit.Close()

	code, got := postJSON(t, check.URL, `{"key":"user:7","endpoint":"POST /v1/chat","reserve":true}`)
	tok, _ := got["reservation"].(string)
	if code != 200 || tok == "" || got["remaining"] != float64(800) {
		t.Fatalf("reserving check: %d %v", code, got)
	}
	code, got = postJSON(t, check.URL, `{"key":"user:7","endpoint":"POST /v1/chat","reserve":true,"estimate":50}`)
	other, _ := got["reservation"].(string)
	if code != 200 || other == "" || other == tok || got["remaining"] != float64(750) {
		t.Fatalf("second reserving check: %d %v", code, got)
	}
	code, got = postJSON(t, commit.URL, `{"reservation":"`+tok+`","cost":120}`)
	if code != 200 || got["estimate"] != float64(200) || got["actual"] != float64(120) || got["refunded"] != float64(80) {
		t.Fatalf("commit: %d %v", code, got)
	}
	if code, got = postJSON(t, commit.URL, `{"reservation":"`+tok+`","cost":120}`); code != http.StatusConflict {
		t.Fatalf("second commit of one reservation: %d %v, want 409", code, got)
	}
	if code, got = postJSON(t, commit.URL, `{"reservation":"`+other+`","cancel":true}`); code != 200 || got["refunded"] != float64(50) {
		t.Fatalf("cancel: %d %v", code, got)
	}
	// Spent: 120 of the first, nothing of the cancelled one.
	if code, got = postJSON(t, check.URL, `{"key":"user:7","endpoint":"POST /v1/chat","dry_run":true}`); got["remaining"] != float64(880) {
		t.Fatalf("after settling: %d %v, want 880 remaining", code, got)
	}
	// The same id under another client's key is no open reservation.
	tk, _ := parseToken(tok)
	forged := reservationToken(tk.endpoint, tk.tier, "user:8", limiter.Reservation{ID: tk.id, Estimate: 200, Expires: tk.expires})
	if code, got = postJSON(t, commit.URL, `{"reservation":"`+forged+`","cost":0}`); code != http.StatusConflict {
		t.Fatalf("a token moved to another key: %d %v, want 409", code, got)
	}
	gone := reservationToken("POST /v1/other", tk.tier, tk.client, limiter.Reservation{ID: tk.id})
	for _, c := range []struct {
		body string
		code int
	}{
		{`{"reservation":"` + gone + `","cost":1}`, http.StatusNotFound},
		{`{"reservation":"r1.!!","cost":1}`, http.StatusBadRequest},
		{`{"reservation":"` + tok + `"}`, http.StatusBadRequest},
		{`{"reservation":"` + tok + `","cost":-1}`, http.StatusBadRequest},
		{`{"reservation":"` + tok + `","cost":1,"cancel":true}`, http.StatusBadRequest},
		{`{"reservation":"` + tok + `","cost":1,"extra":1}`, http.StatusBadRequest},
		{`{"cost":1}`, http.StatusBadRequest},
	} {
		if code, got := postJSON(t, commit.URL, c.body); code != c.code {
			t.Errorf("%s: %d %v, want %d", c.body, code, got, c.code)
		}
	}
	if code, got := postJSON(t, check.URL, `{"key":"user:7","endpoint":"POST /v1/chat","reserve":true,"dry_run":true}`); code != 400 {
		t.Errorf("a reserving dry run: %d %v, want 400", code, got)
	}
	ev.mu.Lock()
	defer ev.mu.Unlock()
	if ev.reserved != 250 || len(ev.settled) != 2 {
		t.Errorf("cost events: reserved %d, settled %v", ev.reserved, ev.settled)
	}
}
