package config

import (
	"strings"
	"testing"
)

// A class route under the decision API's prefix is named by check: the upstream's own path of
// the same name would be answered by rl-exporter; a prefix of its own clears the warning.
func TestCheckWarnsOfAClassRouteUnderTheDecisionAPIPrefix(t *testing.T) {
	const classes = `classes:
  chat: {routes: ["POST /v1/chat/completions"], limits: {default: {algorithm: gcra, rate: 10, period: 1m}}}
  default: {limits: {default: {algorithm: gcra, rate: 10, period: 1m}}}
`
	c, err := Parse("llm.yaml", []byte(classes))
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, f := range c.Exposure() {
		found = append(found, f.String())
	}
	if len(found) != 1 || !strings.HasPrefix(found[0], `server.check_api.prefix: /v1/: classes.chat.routes[0] "POST /v1/chat/completions" is under it`) {
		t.Fatalf("findings %q, want the chat route under /v1/ named", found)
	}
	c, err = Parse("llm.yaml", []byte("server: {check_api: {prefix: /ratelimit/}}\n"+classes))
	if err != nil {
		t.Fatal(err)
	}
	if f := c.Exposure(); len(f) != 0 {
		t.Fatalf("with the prefix moved: %v", f)
	}
	for _, bad := range []string{"ratelimit/", "/ratelimit", "/a//b/", "/a/../b/", "/a?b/"} {
		if _, err := Parse("bad.yaml", []byte("server: {check_api: {prefix: \""+bad+"\"}}\n"+classes)); err == nil || !strings.Contains(err.Error(), "server.check_api.prefix: \""+bad+"\"") {
			t.Errorf("prefix %q: %v, want it named", bad, err)
		}
	}
}
