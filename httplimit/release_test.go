package httplimit

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// The decision API's table mounts release on its own handler: ReleasePath gives a lease back,
// CheckPath's handler decides and nothing else, so a release body posted to it is a bad check.
func TestTheDecisionAPIReleasesOnItsOwnHandler(t *testing.T) {
	m, rec := jobsLeases(t, 1)
	api := m.DecisionAPI()
	check, release := api[CheckPath], api[ReleasePath]
	ask := `{"key":"user:1","endpoint":"POST /jobs/run","lease":true}`
	code, out, _ := checkCall(t, check, CheckPath, ask)
	lease, _ := out["lease"].(string)
	if code != 200 || lease == "" {
		t.Fatalf("lease: %d %v", code, out)
	}
	if code, out, _ = checkCall(t, release, ReleasePath, `{"lease":"`+lease+`"}`); code != 200 || out["released"] != true || rec.held() != 0 {
		t.Fatalf("release: %d %v, %d in flight", code, out, rec.held())
	}
	if code, out, _ = checkCall(t, m.ReleaseHandler(), ReleasePath, `{"lease":"`+lease+`"}`); code != 404 || out["error"] != "lease_unknown" {
		t.Fatalf("ReleaseHandler, released twice: %d %v", code, out)
	}
	// An embedder that mounted CheckHandler at ReleasePath too is still served, for one release.
	if code, out, _ = checkCall(t, check, CheckPath, ask); code != 200 {
		t.Fatalf("second lease: %d %v", code, out)
	}
	lease, _ = out["lease"].(string)
	if code, out, _ = checkCall(t, m.CheckHandler(), ReleasePath, `{"lease":"`+lease+`"}`); code != 200 || out["released"] != true || rec.held() != 0 {
		t.Fatalf("a release posted to CheckHandler (deprecated): %d %v, %d in flight", code, out, rec.held())
	}
	w := httptest.NewRecorder()
	release.ServeHTTP(w, httptest.NewRequest(http.MethodGet, ReleasePath, nil))
	if w.Code != http.StatusMethodNotAllowed || w.Header().Get("Allow") != http.MethodPost {
		t.Fatalf("GET %s: %d, Allow %q", ReleasePath, w.Code, w.Header().Get("Allow"))
	}
}
