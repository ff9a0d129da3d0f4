package config

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/httplimit"
	"github.com/rl-exporter/rl-exporter/limiter"
)

// tierListConfig is a class whose pro tier puts four limits on each
// request: requests per minute, tokens per minute, a calendar month per
// organisation and a cap on requests in flight.
const tierListConfig = `tiers: {names: [free, pro], default: free}
identity: {trusted_header_peers: [10.0.0.0/8]}
classes:
  chat:
    cost: 3
    limits:
      free: {algorithm: fixed_window, rate: 100, period: 1m}
      pro: [{name: rpm, algorithm: sliding_window, rate: 500, period: 1m, unit: requests}, {name: tpm, algorithm: token_bucket, rate: 200000, period: 1m}, {name: monthly, algorithm: fixed_window, rate: 50000000, period: month, calendar: {time_zone: UTC}, scope: {header: X-Org-ID}}, {name: inflight, algorithm: concurrency, limit: 20}]
`

// policyClass is the class named name of c as httplimit compiles it.
func policyClass(t *testing.T, c *Config, name string) httplimit.Class {
	t.Helper()
	pc, err := c.PolicyConfig(limiter.NewMemoryStore(limiter.MemoryConfig{}), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, hc := range pc.Classes {
		if hc.Name == name {
			return hc
		}
	}
	t.Fatalf("no class %s in %+v", name, pc.Classes)
	return httplimit.Class{}
}

// singleLimit is the limiter.Limit a single-form limit converts to.
func singleLimit(t *testing.T, limit string) limiter.Limit {
	t.Helper()
	c, err := Parse("single.yaml", []byte("classes: {x: {limits: {default: "+limit+"}}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	return policyClass(t, c, "x").Limits["default"]
}

func TestATiersListConvertsToItsTierLimitsInOrder(t *testing.T) {
	c, err := Parse("list.yaml", []byte(tierListConfig))
	if err != nil {
		t.Fatal(err)
	}
	hc := policyClass(t, c, "chat")
	want := []httplimit.TierLimit{
		{Name: "rpm", Limit: singleLimit(t, "{algorithm: sliding_window, rate: 500, period: 1m}"), Unit: httplimit.UnitRequests, Scope: httplimit.Scope{Kind: httplimit.ScopeClient}},
		{Name: "tpm", Limit: singleLimit(t, "{algorithm: token_bucket, rate: 200000, period: 1m}"), Unit: httplimit.UnitCost, Scope: httplimit.Scope{Kind: httplimit.ScopeClient}},
		{Name: "monthly", Limit: singleLimit(t, "{algorithm: fixed_window, rate: 50000000, period: month, calendar: {time_zone: UTC}}"), Unit: httplimit.UnitCost,
			Scope: httplimit.Scope{Kind: httplimit.ScopeHeader, Header: "X-Org-ID"}},
		{Name: "inflight", Lease: &limiter.LeaseLimit{Limit: 20, TTL: DefaultLeaseTTL}, Unit: httplimit.UnitRequests, Scope: httplimit.Scope{Kind: httplimit.ScopeClient}},
	}
	if got := hc.TierLimits["pro"]; !reflect.DeepEqual(got, want) {
		t.Errorf("pro's limits:\n got %+v\nwant %+v", got, want)
	}
	if want := singleLimit(t, "{algorithm: fixed_window, rate: 100, period: 1m}"); len(hc.Limits) != 1 || hc.Limits["free"] != want {
		t.Errorf("limits %+v, want free's alone (a listed tier has no Limits entry)", hc.Limits)
	}
	if len(hc.Leases) != 0 || len(hc.TierLimits) != 1 {
		t.Errorf("leases %+v, tier limits %+v: want pro's list alone", hc.Leases, hc.TierLimits)
	}
}

// A class with a cost other than 1 counts its cost by default; requests
// only when a limit says so. Shadow overrides the class's.
func TestAListsUnitShadowAndPenaltyDefaultsAndOverrides(t *testing.T) {
	c, err := Parse("list.yaml", []byte(`tiers: {names: [free, pro], default: free}
classes:
  api:
    cost: 5
    shadow: true
    penalty: {after: 3, for: 1m}
    limits:
      free: {algorithm: gcra, rate: 5, period: 1s}
      pro:
        - {name: points, algorithm: gcra, rate: 900, period: 1m}
        - {name: calls, algorithm: fixed_window, rate: 100, period: 1m, unit: requests, shadow: false}
        - {name: all, algorithm: fixed_window, rate: 100000, period: 1m, scope: global}
`))
	if err != nil {
		t.Fatal(err)
	}
	got := policyClass(t, c, "api").TierLimits["pro"]
	if len(got) != 3 {
		t.Fatalf("limits %+v", got)
	}
	if got[0].Unit != httplimit.UnitCost || got[1].Unit != httplimit.UnitRequests {
		t.Errorf("units %s, %s; want cost (the class's cost is 5), requests", got[0].Unit, got[1].Unit)
	}
	if got[0].Shadow != nil || got[0].Penalty != nil {
		t.Errorf("points overrides %v %v; want the class's", got[0].Shadow, got[0].Penalty)
	}
	if got[1].Shadow == nil || *got[1].Shadow || got[1].Penalty != nil {
		t.Errorf("calls overrides %v %+v; want shadow false, the class's penalty", got[1].Shadow, got[1].Penalty)
	}
	if got[2].Scope != (httplimit.Scope{Kind: httplimit.ScopeGlobal}) {
		t.Errorf("all's scope %+v, want global", got[2].Scope)
	}
}

// Each mistake in a list is reported once, naming its key.
func TestAListsMistakesNameTheirKeys(t *testing.T) {
	const head = "tiers: {names: [free, pro], default: free}\nclasses:\n  chat:\n    limits:\n      free: {algorithm: fixed_window, rate: 100, period: 1m}\n"
	const rpm = "{name: rpm, algorithm: sliding_window, rate: 500, period: 1m}"
	regions := "store: {type: redis, redis: {url: \"redis://127.0.0.1:1\"}}\nregion: {name: a, peers: {b: {url: \"redis://127.0.0.1:2\"}}}\n"
	for _, c := range []struct {
		name, file, want string
	}{
		{"a duplicate name", head + "      pro: [" + rpm + ", " + rpm + "]\n",
			`classes.chat.limits.pro[1].name: "rpm" names pro[0] already`},
		{"no name", head + "      pro: [{algorithm: gcra, rate: 5, period: 1s}]\n",
			"classes.chat.limits.pro[0].name: required in a list"},
		{"a bad name", head + "      pro: [{name: \"r p m\", algorithm: gcra, rate: 5, period: 1s}]\n",
			`classes.chat.limits.pro[0].name: "r p m": letters, digits, '_' and '-' only`},
		{"a bad unit", head + "      pro: [{name: rpm, algorithm: gcra, rate: 5, period: 1s, unit: request}]\n",
			`classes.chat.limits.pro[0].unit: "request": want requests or cost; did you mean requests?`},
		{"unit cost on concurrency", head + "      pro: [" + rpm + ", {name: inflight, algorithm: concurrency, limit: 5, unit: cost}]\n",
			"classes.chat.limits.pro[1].unit: algorithm concurrency counts requests in flight, not cost"},
		{"a header scope no peer is trusted for", head + "      pro: [" + rpm + ", {name: org, algorithm: fixed_window, rate: 5, period: day, scope: {header: X-Org-ID}}]\n",
			"classes.chat.limits.pro[1].scope.header: X-Org-ID is believed only from identity.trusted_header_peers, which is empty: list the gateways that set it"},
		{"a claim scope without JWT", head + "      pro: [" + rpm + ", {name: org, algorithm: fixed_window, rate: 5, period: day, scope: {claim: org_id}}]\n",
			"classes.chat.limits.pro[1].scope.claim: org_id is read from a verified JWT, and identity.jwt.algorithm is not set"},
		{"an unknown scope", head + "      pro: [{name: rpm, algorithm: gcra, rate: 5, period: 1s, scope: globl}]\n",
			`classes.chat.limits.pro[0].scope: "globl": want client, global, {header: NAME} or {claim: NAME}; did you mean global?`},
		{"a scope of two kinds", head + "      pro: [{name: rpm, algorithm: gcra, rate: 5, period: 1s, scope: {header: X-Org, claim: org}}]\n",
			"classes.chat.limits.pro[0].scope: set one of header or claim, not both"},
		{"a bad header name", strings.Replace(head, "classes:", "identity: {trusted_header_peers: [10.0.0.1]}\nclasses:", 1) + "      pro: [{name: rpm, algorithm: gcra, rate: 5, period: 1s, scope: {header: \"X Org\"}}]\n",
			`classes.chat.limits.pro[0].scope.header: "X Org" is not a header name`},
		{"a bad rate", head + "      pro: [" + rpm + ", {name: tpm, algorithm: token_bucket, rate: 0, period: 1m}]\n",
			"classes.chat.limits.pro[1].rate: must be > 0, got 0"},
		{"a period that does not decode", head + "      pro: [" + rpm + ", {name: tpm, algorithm: token_bucket, rate: 5, period: 1 minute}]\n",
			`classes.chat.limits.pro[1].period: "1 minute" is neither a Go duration (such as 1m, 24h) nor day, week, month or year; did you mean 1m?`},
		{"a misspelt key", head + "      pro: [{name: rpm, algoritm: gcra, rate: 5, period: 1s}]\n",
			"classes.chat.limits.pro[0].algoritm: unknown key; did you mean algorithm?"},
		{"an entry that is no map", head + "      pro: [rpm]\n",
			"classes.chat.limits.pro[0]: expected a map"},
		{"an empty list", head + "      pro: []\n",
			"classes.chat.limits.pro: an empty list limits nothing"},
		{"a bad penalty", head + "      pro: [{name: rpm, algorithm: gcra, rate: 5, period: 1s, penalty: {after: 3}}]\n",
			"classes.chat.limits.pro[0].penalty.for: must be at least 1ms"},
		{"priorities that disagree", head + "      pro: [{name: rpm, algorithm: gcra, rate: 5, period: 1s, priority: critical}, {name: tpm, algorithm: gcra, rate: 5, period: 1s, priority: sheddable}]\n",
			`classes.chat.limits.pro[1].priority: sheddable, but pro[0] says critical: one request has one priority`},
		{"a region mode on an entry", regions + head + "      pro: [{name: rpm, algorithm: gcra, rate: 5, period: 1s, region_mode: strict}]\n",
			"classes.chat.limits.pro[0].region_mode: strict cannot decide a list of limits as one"},
		{"the class's region mode", regions + strings.Replace(head, "    limits:", "    region_mode: hybrid\n    limits:", 1) + "      pro: [" + rpm + "]\n",
			"classes.chat.limits.pro: region_mode hybrid (the class's) cannot decide a list of limits as one"},
		{"a calendar on a bucket", head + "      pro: [{name: m, algorithm: gcra, rate: 5, period: month}]\n",
			"classes.chat.limits.pro[0].calendar: only fixed_window"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("bad.yaml", []byte(c.file))
			if err == nil {
				t.Fatalf("accepted, want %q", c.want)
			}
			if !strings.Contains(err.Error(), "config bad.yaml: "+c.want) {
				t.Errorf("got\n%v\nwant a line with %q", err, c.want)
			}
		})
	}
}

// The single form is what it was: one limit, on the tier's Limits.
func TestTheSingleFormIsUnchanged(t *testing.T) {
	c, err := Parse("single.yaml", []byte("classes: {api: {limits: {default: {algorithm: gcra, rate: 5, period: 1s}}}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	hc := policyClass(t, c, "api")
	if len(hc.TierLimits) != 0 || hc.Limits["default"] != (limiter.Limit{Algorithm: limiter.GCRA, Rate: 5, Period: time.Second}) {
		t.Errorf("limits %+v, tier limits %+v", hc.Limits, hc.TierLimits)
	}
}

// An environment override reaches a list's entry by its name; a key of
// a single limit on a listed tier is refused, naming the variable.
func TestEnvironmentOverridesAddressAListsEntryByName(t *testing.T) {
	file := writeFile(t, t.TempDir(), "list.yaml", tierListConfig)
	c, err := Sources{File: file, Env: []string{"RL_CLASSES__CHAT__LIMITS__PRO__TPM__RATE=300000", "RL_CLASSES__CHAT__LIMITS__FREE__RATE=50"}}.Load()
	if err != nil {
		t.Fatal(err)
	}
	hc := policyClass(t, c, "chat")
	if got := hc.TierLimits["pro"][1]; got.Name != "tpm" || got.Limit.Rate != 300000 {
		t.Errorf("tpm %+v, want rate 300000", got)
	}
	if hc.TierLimits["pro"][0].Limit.Rate != 500 || hc.Limits["free"].Rate != 50 {
		t.Errorf("the others changed: %+v %+v", hc.TierLimits["pro"][0], hc.Limits["free"])
	}
	for env, want := range map[string]string{
		"RL_CLASSES__CHAT__LIMITS__PRO__RATE=5":        "classes.chat.limits.pro is a list: address one of its limits by name (rpm, tpm, monthly, inflight), as RL_CLASSES__CHAT__LIMITS__PRO__<NAME>__RATE",
		"RL_CLASSES__CHAT__LIMITS__PRO__TMP__RATE=5":   `classes.chat.limits.pro has no limit named "tmp" (rpm, tpm, monthly, inflight)`,
		"RL_CLASSES__CHAT__LIMITS__FREE__RPM__RATE=5":  "classes.chat.limits.free.rpm: unknown key",
		"RL_CLASSES__CHAT__LIMITS__PRO__TPM__RATE=one": `"one" is not an integer`,
	} {
		_, err := Sources{File: file, Env: []string{env}}.Load()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", env, err, want)
		}
	}
}

// A scope header is named among the headers believed from the trusted
// peers; a budget shared beyond one client under region_mode local is
// each region's own, which is said.
func TestAListsScopesAreFindings(t *testing.T) {
	c, err := Parse("list.yaml", []byte(tierListConfig))
	if err != nil {
		t.Fatal(err)
	}
	if !hasFinding(c.Exposure(), "classes.chat.limits.pro[2].scope.header", "X-Org-ID is believed from identity.trusted_header_peers") {
		t.Errorf("findings %v", c.Exposure())
	}
	multi := "store: {type: redis, redis: {url: \"redis://127.0.0.1:1\"}}\nregion: {name: a, peers: {b: {url: \"redis://127.0.0.1:2\"}}}\n" + tierListConfig
	c, err = Parse("list.yaml", []byte(multi))
	if err != nil {
		t.Fatal(err)
	}
	if !hasFinding(c.Exposure(), "classes.chat.limits.pro[2].scope", "region_mode local counts it in each region apart") {
		t.Errorf("findings %v", c.Exposure())
	}
}

func hasFinding(fs []Finding, key, msg string) bool {
	for _, f := range fs {
		if f.Key == key && strings.Contains(f.Message, msg) && !f.Refuse {
			return true
		}
	}
	return false
}

// A penalty box of one limit of a list is that limit's own: within defaults
// to its period, and the policy compiles it.
func TestAPenaltyOnOneLimitOfAListIsItsOwn(t *testing.T) {
	c, err := Parse("list.yaml", []byte(`tiers: {names: [free, pro], default: free}
classes:
  api:
    limits:
      free: {algorithm: gcra, rate: 5, period: 1s}
      pro:
        - {name: points, algorithm: gcra, rate: 900, period: 1m}
        - {name: calls, algorithm: fixed_window, rate: 100, period: 1m, penalty: {after: 10, for: 5m}}
`))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	pc, err := c.PolicyConfig(limiter.NewMemoryStore(limiter.MemoryConfig{}), nil)
	if err != nil {
		t.Fatalf("PolicyConfig: %v", err)
	}
	var got *limiter.Penalty
	for _, cl := range pc.Classes {
		for _, l := range cl.TierLimits["pro"] {
			if cl.Name == "api" && l.Name == "calls" {
				got = l.Penalty
			}
		}
	}
	if want := (limiter.Penalty{After: 10, Within: time.Minute, For: 5 * time.Minute}); got == nil || *got != want {
		t.Fatalf("calls' penalty %+v, want %+v", got, want)
	}
	if _, err := httplimit.NewPolicy(pc); err != nil {
		t.Fatalf("NewPolicy: %v", err)
	}
}
