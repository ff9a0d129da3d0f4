package httplimit

import (
	"errors"
	"testing"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// A config file reports these problems by key, so each names its field as
// a *limiter.FieldError rather than in text to be split.
func TestEstimateAndPathsProblemsNameTheFieldAtFault(t *testing.T) {
	for _, tc := range []struct {
		name  string
		err   error
		field string
	}{
		{"a negative min", Estimate{Min: -1, Default: 1}.Validate(), "min"},
		{"a default below min", Estimate{Min: 5, Default: 2}.Validate(), "default"},
		{"a negative max", Estimate{Default: 1, Max: -1}.Validate(), "max"},
		{"a max below the default", Estimate{Default: 10, Max: 5}.Validate(), "max"},
		{"an unknown escaped_slashes", Paths{EscapedSlashes: "drop"}.Validate(), "escaped_slashes"},
		{"an unknown case", Paths{Case: "upper"}.Validate(), "case"},
		{"an unknown trailing_slash", Paths{TrailingSlash: "add"}.Validate(), "trailing_slash"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var fe *limiter.FieldError
			if !errors.As(tc.err, &fe) || fe.Field != tc.field {
				t.Errorf("%v: want a *limiter.FieldError on %q", tc.err, tc.field)
			}
		})
	}
	if err := (Estimate{Default: 1, JSON: "max_tokens", Header: "X-Max"}).Validate(); err == nil {
		t.Error("json and header both set: no error")
	}
}
