package httplimit

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// setupChatPenalty is the chat class with a penalty box of its own on rpm (3 refusals within a
// minute box the client for 10 minutes) and, when classToo, the class's box after 2 refusals.
func setupChatPenalty(t *testing.T, classToo bool) (*Middleware, http.Handler, *fakeClock) {
	t.Helper()
	clk := newClock()
	cfg := chatPolicy(limiter.NewMemoryStore(limiter.MemoryConfig{Now: clk.Now}))
	list := chatTier()
	list[0].Limit = limiter.PerMinute(limiter.FixedWindow, 2)
	list[0].Penalty = &limiter.Penalty{After: 3, Within: time.Minute, For: 10 * time.Minute}
	cfg.Classes[0].TierLimits = map[string][]TierLimit{"default": list}
	if classToo {
		cfg.Classes[0].Penalty = limiter.Penalty{After: 2, Within: time.Minute, For: time.Hour}
	}
	m, h, _ := setupChatWith(t, cfg, clk)
	return m, h, clk
}

func TestTierLimitsAPenaltyOnOneLimitBoxesTheClientItRefusesAndNamesIt(t *testing.T) {
	m, h, clk := setupChatPenalty(t, false)
	for i := range 2 {
		if w := chat(h, "alice", "acme", 1); w.Code != http.StatusOK {
			t.Fatalf("request %d: %d", i+1, w.Code)
		}
	}
	for i := range 3 { // rpm's three refusals trip its box
		if w := chat(h, "alice", "acme", 1); w.Code != http.StatusTooManyRequests || !strings.Contains(w.Body.String(), `"refused_by":["rpm"]`) {
			t.Fatalf("refusal %d: %d %s", i+1, w.Code, w.Body)
		}
	}
	clk.Advance(2 * time.Minute) // rpm's window is long past: only the box refuses now
	w := chat(h, "alice", "acme", 1)
	if w.Code != http.StatusTooManyRequests || !strings.Contains(w.Body.String(), `"refused_by":["rpm"]`) {
		t.Fatalf("boxed request: %d %s, want 429 naming rpm, whose box holds the client", w.Code, w.Body)
	}
	if got := w.Header().Get("Retry-After"); got != "480" {
		t.Errorf("Retry-After %q, want the box's 480 s left", got)
	}
	if u := partUsage(t, m, "user:alice", "chat", "monthly", org("acme")); u.Used != 2 {
		t.Errorf("acme's month used %d, want 2: neither a refused nor a boxed request takes from it", u.Used)
	}
	if w := chat(h, "bob", "acme", 1); w.Code != http.StatusOK {
		t.Errorf("bob of the same organisation: %d, want 200: the box holds the client it refused", w.Code)
	}
	clk.Advance(9 * time.Minute)
	if w := chat(h, "alice", "acme", 1); w.Code != http.StatusOK {
		t.Errorf("after the box: %d %s", w.Code, w.Body)
	}
}

func TestTierLimitsALimitsOwnPenaltyOverridesTheClassesForItsRefusals(t *testing.T) {
	_, h, clk := setupChatPenalty(t, true)
	for range 2 {
		chat(h, "alice", "acme", 1)
	}
	// Two refusals by rpm: its own box (after 3) is not tripped, and the class's (after 2) does not
	// count them.
	for range 2 {
		chat(h, "alice", "acme", 1)
	}
	clk.Advance(2 * time.Minute)
	if w := chat(h, "alice", "acme", 1); w.Code != http.StatusOK {
		t.Fatalf("after two refusals by rpm: %d %s, want 200: the class's box counts only the limits without their own", w.Code, w.Body)
	}
	// tpm has no box of its own: two refusals by it trip the class's.
	for range 2 {
		if w := chat(h, "alice", "acme", 100); w.Code != http.StatusTooManyRequests {
			t.Fatalf("a request over tpm: %d", w.Code)
		}
	}
	clk.Advance(2 * time.Minute)
	if w := chat(h, "alice", "acme", 1); w.Code != http.StatusTooManyRequests {
		t.Errorf("after two refusals by tpm: %d, want 429 from the class's box", w.Code)
	}
}

func TestTierLimitsResettingAClientForgetsItsOwnLimitsAndBoxesButNotItsOrganisations(t *testing.T) {
	m, h, _ := setupChatPenalty(t, false)
	for range 5 { // two admitted, three refused by rpm: its box holds alice
		chat(h, "alice", "acme", 10)
	}
	states, err := m.ResetClient(t.Context(), "user:alice", "")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, st := range states {
		if st.Class == "chat" {
			got = append(got, fmt.Sprintf("%s/%s/%v", st.PlanTier, st.Limit, st.Penalty))
		}
	}
	if want := "/rpm/true default/rpm/false default/tpm/false"; strings.Join(got, " ") != want {
		t.Errorf("chat's states reset %v, want %s: the client's own limits and rpm's box, not the organisation's month", got, want)
	}
	if w := chat(h, "alice", "acme", 10); w.Code != http.StatusOK {
		t.Errorf("after the reset: %d %s", w.Code, w.Body)
	}
	if u := partUsage(t, m, "user:alice", "chat", "monthly", org("acme")); u.Used != 30 {
		t.Errorf("acme's month used %d after alice's reset, want 30: an organisation's budget is not one client's", u.Used)
	}
}
