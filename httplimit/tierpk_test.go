package httplimit

import (
	"net/http"
	"regexp"
	"testing"

	"github.com/dunglas/httpsfv"
	"github.com/rl-exporter/rl-exporter/limiter"
)

// policyItems parses a RateLimit-Policy value as the draft's List of Items, each by name.
func policyItems(t *testing.T, v string) map[string]httpsfv.Item {
	t.Helper()
	l, err := httpsfv.UnmarshalList([]string{v})
	if err != nil {
		t.Fatalf("RateLimit-Policy %q is not a structured list: %v", v, err)
	}
	out := map[string]httpsfv.Item{}
	for _, m := range l {
		it := m.(httpsfv.Item)
		out[it.Value.(string)] = it
	}
	return out
}

func pkOf(t *testing.T, it httpsfv.Item) []byte {
	t.Helper()
	v, ok := it.Params.Get("pk")
	if !ok {
		return nil
	}
	b, ok := v.([]byte)
	if !ok {
		t.Fatalf("pk %v is not a byte sequence", v)
	}
	return b
}

func TestTierLimitsRateLimitPolicyGivesAPartitionKeyToEveryLimitNotTheClients(t *testing.T) {
	clk := newClock()
	_, h := setupChat(t, limiter.NewMemoryStore(limiter.MemoryConfig{Now: clk.Now}), clk)
	policyOf := func(user, org string) map[string]httpsfv.Item {
		w := chat(h, user, org, 1)
		if w.Code != http.StatusOK {
			t.Fatalf("%s of %s: %d", user, org, w.Code)
		}
		return policyItems(t, w.Header().Get("RateLimit-Policy"))
	}
	alice, bob, erin := policyOf("alice", "acme"), policyOf("bob", "acme"), policyOf("erin", "globex")
	for _, name := range []string{"rpm", "tpm"} {
		if pk := pkOf(t, alice[name]); pk != nil {
			t.Errorf("%s, counted per client, has pk %x: the client is the partition it knows", name, pk)
		}
	}
	a, b, e := pkOf(t, alice["monthly"]), pkOf(t, bob["monthly"]), pkOf(t, erin["monthly"])
	if len(a) == 0 || string(a) != string(b) {
		t.Errorf("monthly's pk: alice %x, bob %x: two clients of one organisation share its partition, and should see one key", a, b)
	}
	if string(a) == string(e) {
		t.Errorf("monthly's pk %x is the same for acme and globex", a)
	}
	if regexp.MustCompile(`acme|globex`).Match(a) {
		t.Errorf("pk %q shows the organisation's name", a)
	}
	// A global limit's partition is the class's, the same for every client.
	search := func(user string) []byte {
		w := do(h, "GET", "/search", gatewayPeer, map[string]string{"X-User-ID": user})
		return pkOf(t, policyItems(t, w.Header().Get("RateLimit-Policy"))["backend"])
	}
	if x, y := search("u1"), search("u2"); len(x) == 0 || string(x) != string(y) {
		t.Errorf("backend's pk %x and %x: want one key for every client of a global limit", x, y)
	}
}
