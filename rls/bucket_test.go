package rls

import "testing"

func compileYAML(t *testing.T, src string) *Rules {
	t.Helper()
	f, err := ParseFile("chat.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	r, err := Compile("chat.yaml", f)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestMatchBucketAsDescriptorEntries(t *testing.T) {
	r := compileYAML(t, `
domain: chat
descriptors:
  - key: name
    value: chat
    rate_limit: {unit: second, requests_per_unit: 100}
  - key: name
    value: banned
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: name
    value: free
    rate_limit: {unlimited: true}
  - key: tenant
    descriptors:
      - key: plan
        value: pro
        rate_limit: {unit: minute, requests_per_unit: 600}
      - key: plan
        rate_limit: {unit: minute, requests_per_unit: 60, algorithm: token_bucket, burst: 10}
`)
	cases := []struct {
		bucket map[string]string
		path   string
		rate   int64
		block  bool
		unlim  bool
	}{
		{map[string]string{"name": "chat"}, "chat.name_chat", 100, false, false},
		{map[string]string{"name": "banned"}, "chat.name_banned", 0, true, false},
		{map[string]string{"name": "free"}, "chat.name_free", 0, false, true},
		// A map has no order: the file's nesting gives it.
		{map[string]string{"plan": "pro", "tenant": "acme"}, "chat.tenant.plan_pro", 600, false, false},
		{map[string]string{"tenant": "acme", "plan": "basic"}, "chat.tenant.plan", 60, false, false},
	}
	for _, c := range cases {
		q, ok := r.MatchBucket("chat", c.bucket)
		if !ok {
			t.Errorf("%v: no rule", c.bucket)
			continue
		}
		if q.Path != c.path || q.Limit.Rate != c.rate || q.Blocked != c.block || q.Unlimited != c.unlim || q.File != "chat.yaml" {
			t.Errorf("%v: got %+v, want path %s rate %d blocked %v unlimited %v", c.bucket, q, c.path, c.rate, c.block, c.unlim)
		}
	}
	for _, b := range []map[string]string{{"name": "other"}, {"tenant": "acme"}, {"name": "chat", "extra": "x"}, {}} {
		if q, ok := r.MatchBucket("chat", b); ok {
			t.Errorf("%v: matched %+v, want no rule", b, q)
		}
	}
	if _, ok := r.MatchBucket("other", map[string]string{"name": "chat"}); ok {
		t.Error("a domain with no file matched")
	}
}

func TestQuotaRulesRefuseWhatATokenBucketCannotHold(t *testing.T) {
	r := compileYAML(t, `
domain: chat
descriptors:
  - key: name
    value: tokens
    rate_limit: {unit: minute, requests_per_unit: 1000, charge_on_stream_done: true, algorithm: token_bucket}
  - key: name
    value: chat
    rate_limit: {unit: second, requests_per_unit: 100}
`)
	qs := r.QuotaRules()
	if len(qs) != 2 || qs[0].Refused != "" || qs[1].Path != "chat.name_tokens" || qs[1].Refused == "" {
		t.Fatalf("quota rules: %+v, want chat.name_tokens refused", qs)
	}
}
