package app

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/rl-exporter/rl-exporter/config"
	"github.com/rl-exporter/rl-exporter/httplimit"
)

// A reload compiles the policy once, and the policy it compiled is the one in force: a second
// compilation of the same file would only double the work under the reload's lock.
func TestAReloadCompilesThePolicyOnce(t *testing.T) {
	conf := func(rate int) *config.Config {
		c, err := config.Parse("rl.yaml", []byte(fmt.Sprintf(`
server: {listen: "127.0.0.1:0"}
classes:
  default:
    limits: {default: {algorithm: fixed_window, rate: %d, period: 1m}}
`, rate)))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	srv, err := Build(conf(10), Deps{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Shutdown() })
	compiled := 0
	newPolicy = func(pc httplimit.PolicyConfig) (*httplimit.Policy, error) {
		compiled++
		return httplimit.NewPolicy(pc)
	}
	t.Cleanup(func() { newPolicy = httplimit.NewPolicy })
	if err := srv.Reload(conf(20)); err != nil {
		t.Fatal(err)
	}
	if compiled != 1 {
		t.Errorf("a reload compiled the policy %d times, want once", compiled)
	}
	w := httptest.NewRecorder()
	srv.Middleware().Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})).ServeHTTP(w, httptest.NewRequest("GET", "/x", nil))
	if got := w.Header().Get("X-RateLimit-Limit"); got != "20" {
		t.Errorf("X-RateLimit-Limit %q after the reload, want the reloaded 20", got)
	}
}
