package config

import (
	"slices"
	"strings"
	"testing"
)

// api_key_header takes one name, as it always has, or a list; the schemes default to Bearer;
// a mistake in any of the three keys is named.
func TestAPIKeyHeadersSchemesAndTheUnusableKeyReachThePolicy(t *testing.T) {
	const tiers = "tiers: {names: [free, pro], default: free, api_keys: {pro: [k]}}\n"
	for name, tc := range map[string]struct {
		identity       string
		headers, sches []string
		refuse         bool
	}{
		"one header, as before": {"{api_key_header: X-API-Key}", []string{"X-API-Key"}, []string{"Bearer"}, false},
		"a list, and Basic":     {"{api_key_header: [Authorization, X-Api-Key], api_key_schemes: [Bearer, Basic], unusable_api_key: refuse}", []string{"Authorization", "X-Api-Key"}, []string{"Bearer", "Basic"}, true},
	} {
		c, err := Parse("ok.yaml", []byte(tiers+"identity: "+tc.identity+"\n"))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		pc, err := c.PolicyConfig(nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		id := pc.Identity
		if !slices.Equal(id.APIKeyHeaders, tc.headers) || !slices.Equal(id.APIKeySchemes, tc.sches) || id.RefuseUnusableAPIKey != tc.refuse {
			t.Errorf("%s: headers %v, schemes %v, refuse %v; want %v, %v, %v", name, id.APIKeyHeaders, id.APIKeySchemes, id.RefuseUnusableAPIKey, tc.headers, tc.sches, tc.refuse)
		}
	}
	_, err := Parse("bad.yaml", []byte(tiers+"identity: {api_key_header: [Authorization, \"X Key\"], api_key_schemes: [\"Bear er\"], unusable_api_key: drop}\n"))
	for _, want := range []string{`identity.api_key_header[1]: "X Key" is not a header name`, `identity.api_key_schemes[0]: "Bear er" is not an authentication scheme`, `identity.unusable_api_key: "drop": want address or refuse`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want %q", err, want)
		}
	}
}
