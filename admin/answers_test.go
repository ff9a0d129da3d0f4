package admin

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

func decodeList(t *testing.T, code int, body string) List {
	t.Helper()
	if code != http.StatusOK {
		t.Fatalf("status %d: %s", code, body)
	}
	var l List
	if err := json.Unmarshal([]byte(body), &l); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	return l
}

func effectiveOf(l List) map[string]string {
	out := map[string]string{}
	for _, in := range l.Limits {
		out[in.Class+"/"+in.Tier] = in.Effective
	}
	return out
}

func TestEveryChangeAnswerShowsTheResultingLimitPerClassAndTier(t *testing.T) {
	h, _, _ := newAPI(t)
	// A tier-wide max_requests keeps each class's own window: the answer
	// says so for each class.
	w := call(h, "PUT", "/admin/v1/limits/free", rwToken, `{"max_requests": 20}`)
	got := effectiveOf(decodeList(t, w.Code, w.Body.String()))
	want := map[string]string{
		"public/free": "20 per 1m0s (token_bucket)",
		"bulk/free":   "20 per 1m0s (fixed_window)",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: effective %q, want %q", k, got[k], v)
		}
	}
	w = call(h, "PATCH", "/admin/v1/limits/free", rwToken, `{"shadow": true, "rollout_percent": 10}`)
	if got := effectiveOf(decodeList(t, w.Code, w.Body.String()))["bulk/free"]; got != "20 per 1m0s (fixed_window); for 10% of clients; shadow: counted, not enforced" {
		t.Errorf("after a shadow rollout: %q", got)
	}
}

func TestAPutNamesTheChangeItReplacedAndAPatchDoesNot(t *testing.T) {
	h, _, _ := newAPI(t)
	first := call(h, "PUT", "/admin/v1/limits/free", rwToken, `{"max_requests": 20, "expires_in": "2h"}`)
	if l := decodeList(t, first.Code, first.Body.String()); l.Replaced != nil || l.Note != "" {
		t.Errorf("the first PUT replaced nothing, yet says %+v %q", l.Replaced, l.Note)
	}
	second := call(h, "PUT", "/admin/v1/limits/free", rwToken, `{"shadow": true, "max_requests": 5}`)
	l := decodeList(t, second.Code, second.Body.String())
	if l.Replaced == nil || l.Replaced.MaxRequests != 20 || l.Replaced.ExpiresAt == nil || l.Replaced.Key != "rl:config:free" {
		t.Fatalf("replaced = %+v, want the first change (20 requests, an expiry) at rl:config:free", l.Replaced)
	}
	if !strings.Contains(l.Note, "PUT replaced") || !strings.Contains(l.Note, "PATCH") {
		t.Errorf("note %q does not say PUT replaced and PATCH merges", l.Note)
	}
	patch := call(h, "PATCH", "/admin/v1/limits/free", rwToken, `{"rollout_percent": 50}`)
	if l := decodeList(t, patch.Code, patch.Body.String()); l.Replaced != nil {
		t.Errorf("a PATCH reports a replaced change: %+v", l.Replaced)
	}
}

func TestADryRunShowsTheResultAndChangesNothing(t *testing.T) {
	h, cache, audit := newAPI(t)
	call(h, "PUT", "/admin/v1/limits/free", rwToken, `{"max_requests": 20}`)
	before := audit.Len()
	w := call(h, "PUT", "/admin/v1/limits/bulk/free?dry_run=true", rwToken, `{"rate": "10/1h"}`)
	l := decodeList(t, w.Code, w.Body.String())
	if !l.DryRun || len(l.Limits) != 1 || l.Limits[0].Effective != "10 per 1h0m0s (fixed_window)" {
		t.Fatalf("dry run answer %+v, want dry_run and bulk/free at 10 per 1h", l)
	}
	if l.Replaced != nil {
		t.Errorf("nothing was at bulk/free, yet replaced = %+v", l.Replaced)
	}
	// Nothing stored, nothing applied, nothing audited.
	if ap := cache.Overlay()["bulk"]["free"]; ap.Limit.Rate != 20 {
		t.Errorf("after the dry run bulk/free enforces %d, want still 20", ap.Limit.Rate)
	}
	if audit.Len() != before {
		t.Errorf("a dry run was audited: %s", audit.String()[before:])
	}
	w = call(h, "GET", "/admin/v1/limits/bulk/free", roToken, "")
	if got := effectiveOf(decodeList(t, w.Code, w.Body.String()))["bulk/free"]; got != "20 per 1m0s (fixed_window)" {
		t.Errorf("after the dry run: %q", got)
	}
	// A dry run of an invalid change is refused as the change would be.
	if w := call(h, "PUT", "/admin/v1/limits/free?dry_run=true", rwToken, `{"max_requests": 0}`); w.Code != http.StatusBadRequest {
		t.Errorf("an invalid dry run: %d %s", w.Code, w.Body.String())
	}
}
