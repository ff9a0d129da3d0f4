package rls_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/rl-exporter/rl-exporter/internal/eventually"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/rls"
)

// The domain files below are the configuration examples of
// envoyproxy/ratelimit's README, unchanged; each test checks the behaviour
// that README describes for it.
var readmeExamples = map[string]string{
	"messaging.yaml": `
domain: messaging
descriptors:
  # Only allow 5 marketing messages a day
  - key: message_type
    value: marketing
    descriptors:
      - key: to_number
        rate_limit:
          unit: day
          requests_per_unit: 5

  # Only allow 100 messages a day to any unique phone number
  - key: to_number
    rate_limit:
      unit: day
      requests_per_unit: 100
`,
	"edge_proxy_per_ip.yaml": `
domain: edge_proxy_per_ip
descriptors:
  - key: remote_address
    rate_limit:
      unit: second
      requests_per_unit: 10

  # Black list IP
  - key: remote_address
    value: 50.0.0.5
    rate_limit:
      unit: second
      requests_per_unit: 0
`,
	"example4.yaml": `
domain: example4
descriptors:
  - key: key
    value: value
    descriptors:
      - key: subkey
        rate_limit:
          requests_per_unit: 300
          unit: second
`,
	"example4_shallow.yaml": `
domain: example4_shallow
descriptors:
  - key: key
    value: value
    rate_limit:
      requests_per_unit: 300
      unit: second
`,
	"internal.yaml": `
domain: internal
descriptors:
  - key: ldap
    rate_limit:
      unlimited: true

  - key: azure
    rate_limit:
      unit: minute
      requests_per_unit: 100
`,
	"example6.yaml": `
domain: example6
descriptors:
  - key: service
    descriptors:
      - key: user
        value: user-a
        rate_limit:
          requests_per_unit: 10
          unit: second
        shadow_mode: true
      - key: user
        value: user-b
        rate_limit:
          requests_per_unit: 20
          unit: second
`,
	"example7.yaml": `
domain: example7
descriptors:
  - key: key_1
    value: value_1
    descriptors:
      - key: user
        value: bkthomps
        rate_limit:
          name: specific_limit
          requests_per_unit: 5
          unit: second
  - key: key_2
    value: value_2
    descriptors:
      - key: user
        value: bkthomps
        rate_limit:
          replaces:
            - name: specific_limit
          requests_per_unit: 10
          unit: second
`,
	"example9.yaml": `
domain: example9
descriptors:
  - key: key1
    value: value*
    rate_limit:
      unit: minute
      requests_per_unit: 20
`,
}

// TestREADMEExamples loads envoyproxy/ratelimit's README examples and
// checks they behave as that README says. A burst against a per-second
// limit starts just after a second begins (windows are aligned on the
// unit), so that it stays inside one window.
func TestREADMEExamples(t *testing.T) {
	dir := writeDir(t, readmeExamples)
	newHarness := func(t *testing.T) *harness {
		return start(t, limiter.NewMemoryStore(limiter.MemoryConfig{}), dir, nil)
	}
	t.Run("messaging: 5 marketing messages a day per number, 100 messages a day per number", func(t *testing.T) {
		h := newHarness(t)
		marketing := desc("message_type", "marketing", "to_number", "2061111111")
		any := desc("to_number", "2061111111")
		for i := range 5 {
			if resp := h.call(t, "messaging", 0, marketing, any); resp.OverallCode != ok {
				t.Fatalf("marketing message %d: %v, want OK", i+1, resp)
			}
		}
		resp := h.call(t, "messaging", 0, marketing, any)
		if !slices.Equal(codes(resp), []rlsv3.RateLimitResponse_Code{over, ok}) || resp.OverallCode != over {
			t.Fatalf("6th marketing message: %v, want [OVER_LIMIT OK]: the OR of both", resp)
		}
		if got := resp.Statuses[1].CurrentLimit.GetRequestsPerUnit(); got != 100 {
			t.Errorf("to_number alone limited at %d, want 100", got)
		}
		if resp := h.call(t, "messaging", 0, desc("message_type", "marketing", "to_number", "2062222222")); resp.OverallCode != ok {
			t.Errorf("another number has its own 5 a day, got %v", resp)
		}
		if n := admitted(t, h, "messaging", desc("to_number", "2063333333"), 101); n != 100 {
			t.Errorf("any number admitted %d a day, want 100", n)
		}
	})
	t.Run("edge_proxy_per_ip: key/value is matched before key alone; 0 per unit blocks", func(t *testing.T) {
		h := newHarness(t)
		if resp := h.call(t, "edge_proxy_per_ip", 0, desc("remote_address", "50.0.0.5")); resp.OverallCode != over {
			t.Errorf("50.0.0.5: %v, want OVER_LIMIT from its first request", resp)
		}
		resp := h.call(t, "edge_proxy_per_ip", 0, desc("remote_address", "50.0.0.1"))
		if resp.OverallCode != ok || resp.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 10 {
			t.Errorf("50.0.0.1: %v, want OK under the generic 10 per second", resp)
		}
	})
	t.Run("example4: a descriptor matches only at the depth it has", func(t *testing.T) {
		h := newHarness(t)
		two := desc("key", "value", "subkey", "subvalue")
		if st := h.call(t, "example4_shallow", 0, two).Statuses[0]; st.CurrentLimit != nil {
			t.Errorf("two entries against a one-level config: %v, want no limit", st)
		}
		if st := h.call(t, "example4", 0, two).Statuses[0]; st.CurrentLimit.GetRequestsPerUnit() != 300 {
			t.Errorf("two entries against the nested config: %v, want 300 per second", st)
		}
	})
	t.Run("internal: unlimited is OK with MaxUint32 remaining; azure is 100 a minute", func(t *testing.T) {
		h := newHarness(t)
		st := h.call(t, "internal", 0, desc("ldap", "x")).Statuses[0]
		if st.Code != ok || st.LimitRemaining != 1<<32-1 {
			t.Errorf("ldap: %v", st)
		}
		if st := h.call(t, "internal", 0, desc("azure", "x")).Statuses[0]; st.CurrentLimit.GetRequestsPerUnit() != 100 || st.CurrentLimit.GetUnit() != rlsv3.RateLimitResponse_RateLimit_MINUTE {
			t.Errorf("azure: %v", st)
		}
	})
	t.Run("example6: user-a in shadow mode is never limited, user-b is", func(t *testing.T) {
		inOneSecond(t, func() (problems []string) {
			h := newHarness(t)
			if n := admitted(t, h, "example6", desc("service", "auth-service", "user", "user-a"), 15); n != 15 {
				problems = append(problems, fmt.Sprintf("user-a admitted %d of 15, want all", n))
			}
			if s := h.count(t, "example6.service.user_user-a", "free", "shadow_rejected"); s != 5 {
				problems = append(problems, fmt.Sprintf("user-a's breaches counted %v, want 5 (10 per second)", s))
			}
			return problems
		})
		inOneSecond(t, func() []string {
			h := newHarness(t)
			if n := admitted(t, h, "example6", desc("service", "auth-service", "user", "user-b"), 25); n != 20 {
				return []string{fmt.Sprintf("user-b admitted %d of 25, want 20", n)}
			}
			return nil
		})
	})
	t.Run("example7: replaces drops the named limit when both apply", func(t *testing.T) {
		d1 := desc("key_1", "value_1", "user", "bkthomps")
		d2 := desc("key_2", "value_2", "user", "bkthomps")
		inOneSecond(t, func() []string {
			h := newHarness(t)
			resp := h.call(t, "example7", 0, d1, d2)
			if resp.Statuses[0].CurrentLimit != nil || resp.Statuses[1].CurrentLimit.GetRequestsPerUnit() != 10 {
				return []string{fmt.Sprintf("%v: want specific_limit replaced, 10 per second in force", resp)}
			}
			if n := admitted(t, h, "example7", d1, 8); n != 5 {
				return []string{fmt.Sprintf("(key_1, value_1), (user, bkthomps) alone admitted %d, want 5: the replacement does not touch it", n)}
			}
			return nil
		})
	})
	t.Run("example9: a trailing * matches values with that prefix", func(t *testing.T) {
		h := newHarness(t)
		for _, v := range []string{"value_1", "value_2"} {
			if st := h.call(t, "example9", 0, desc("key1", v)).Statuses[0]; st.CurrentLimit.GetRequestsPerUnit() != 20 {
				t.Errorf("key1=%s: %v, want 20 per minute", v, st)
			}
		}
		if st := h.call(t, "example9", 0, desc("key1", "other")).Statuses[0]; st.CurrentLimit != nil {
			t.Errorf("key1=other: %v, want no limit", st)
		}
	})
}

// startOfSecond waits until the next second has begun: polled every
// eventually.Every, it returns within that of the second's start.
func startOfSecond() {
	began := time.Now().Unix()
	eventually.Within(2*time.Second, func() bool { return time.Now().Unix() > began })
}

// inOneSecond runs attempt from just after a second begins, and reports
// its problems once a run has ended within that same second; a run that a
// busy machine stretched over two per-second windows is tried again (up
// to 5 runs), since it says nothing about the limit.
func inOneSecond(t *testing.T, attempt func() []string) {
	t.Helper()
	for range 5 {
		startOfSecond()
		began := time.Now().Unix()
		problems := attempt()
		if time.Now().Unix() != began {
			t.Logf("a run spanned two seconds; trying again")
			continue
		}
		for _, p := range problems {
			t.Error(p)
		}
		return
	}
	t.Fatal("no run fitted in one second in 5 tries: the machine is too busy for per-second checks")
}

func TestExample8DetailedMetricLabelsByValueUpToTheCap(t *testing.T) {
	dir := writeDir(t, map[string]string{"example8.yaml": `
domain: example8
descriptors:
  - key: key1
    detailed_metric: true
    rate_limit:
      unit: minute
      requests_per_unit: 10
  - key: key1
    value: value1
    rate_limit:
      unit: minute
      requests_per_unit: 20
`})
	var h *harness
	h = start(t, limiter.NewMemoryStore(limiter.MemoryConfig{}), dir, func(c *rls.Config) {
		c.MaxDetailedEndpoints = 2
		// As serve does: the collector learns each new label.
		c.OnDetailedEndpoint = func(string) {
			eps := []string{"example8.key1", "example8.key1_value1"}
			eps = append(eps, h.svc.DetailedEndpoints()...)
			if err := h.col.Reconfigure(eps, []string{"free", "pro"}, "free"); err != nil {
				t.Error(err)
			}
		}
	})
	for _, v := range []string{"unspecified_value", "unspecified_value2", "unspecified_value", "third", "value1"} {
		h.call(t, "example8", 0, desc("key1", v))
	}
	for ep, want := range map[string]float64{
		"example8.key1_unspecified_value":  2,
		"example8.key1_unspecified_value2": 1,
		"example8.key1":                    1, // the third value, beyond the cap of 2
		"example8.key1_value1":             1, // a value the config names is its own rule
	} {
		if got := h.count(t, ep, "free", "allowed"); got != want {
			t.Errorf("endpoint %s counted %v, want %v", ep, got, want)
		}
	}
	if got := strings.Join(h.svc.DetailedEndpoints(), ","); got != "example8.key1_unspecified_value,example8.key1_unspecified_value2" {
		t.Errorf("detailed endpoints %s", got)
	}
}
