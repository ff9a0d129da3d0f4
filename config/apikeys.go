package config

import (
	"fmt"

	"github.com/rl-exporter/rl-exporter/httplimit"
)

// The values of identity.unusable_api_key.
const (
	UnusableAPIKeyAddress = "address" // key the request by its client address (the default)
	UnusableAPIKeyRefuse  = "refuse"  // answer 401 invalid_api_key
)

// validateAPIKeys checks the API key headers, schemes and unusable_api_key, naming each key.
func (c *Config) validateAPIKeys(e *errs) {
	id := c.Identity
	for i, h := range id.APIKeyHeader {
		if !httplimit.ValidHeaderName(h) {
			e.add(fmt.Sprintf("identity.api_key_header[%d]", i), "%q is not a header name (letters, digits and !#$%%&'*+-.^_`|~)", h)
		}
	}
	for i, sc := range id.APIKeySchemes {
		if !httplimit.ValidHeaderName(sc) { // a scheme is a token, as a header name is
			e.add(fmt.Sprintf("identity.api_key_schemes[%d]", i), "%q is not an authentication scheme (Bearer, Basic, Token, …)", sc)
		}
	}
	switch id.UnusableAPIKey {
	case UnusableAPIKeyAddress, UnusableAPIKeyRefuse:
	default:
		e.add("identity.unusable_api_key", "%q: want %s or %s", id.UnusableAPIKey, UnusableAPIKeyAddress, UnusableAPIKeyRefuse)
	}
}
