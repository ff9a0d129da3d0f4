package config

import (
	"errors"
	"strings"
	"testing"
)

func TestSuggestOffersTheNearestNameWithinTwoEdits(t *testing.T) {
	names := []string{"fixed_window", "sliding_log", "sliding_window", "token_bucket", "leaky_bucket", "gcra"}
	for _, c := range []struct{ got, want string }{
		{"token-bucket", "did you mean token_bucket?"},
		{"gcrb", "did you mean gcra?"},
		{"slidingwindow", "did you mean sliding_window?"},
		{"Fixed_Window", "did you mean fixed_window?"},
		{"magic", ""},
		{"g", ""}, // a short name does not suggest an unrelated one
	} {
		if got := suggest(c.got, names); got != c.want {
			t.Errorf("suggest(%q) = %q, want %q", c.got, got, c.want)
		}
	}
}

func TestALimitsBlockDirectlyUnderClassesIsNamedAsSuchAndNotTakenForAClass(t *testing.T) {
	_, err := Parse("x.yaml", []byte(`
classes:
  api:
    routes: ["GET /api/{path...}"]
  limits:
    default: {algorithm: gcra, rate: 5, period: 1s}
`))
	var ps Problems
	if !errors.As(err, &ps) || len(ps) != 1 {
		t.Fatalf("got %v, want one problem", err)
	}
	if p := ps[0]; p.Key != "classes.limits" || !strings.Contains(p.Msg, "not taken for a class") || p.Hint != "indented one level too shallow? classes.api has no limits: did you mean classes.api.limits?" {
		t.Errorf("got %+v, want classes.limits named as a misplaced block, pointing at classes.api.limits", *p)
	}
	// A class may be named limits, when it is one.
	c, err := Parse("x.yaml", []byte(`
default_class: limits
classes:
  limits:
    routes: ["GET /limits"]
    limits: {default: {algorithm: gcra, rate: 5, period: 1s}}
`))
	if err != nil || c.Classes["limits"].Limits["default"].Rate != 5 {
		t.Errorf("a class named limits: %v, want it loaded", err)
	}
}

func TestAMisspeltKeyIsSuggestedAndNotAlsoReportedAsMissing(t *testing.T) {
	_, err := Parse("x.yaml", []byte("classes: {api: {limits: {default: {algoritm: gcra, rate: 5, period: 1s}}}}\n"))
	var ps Problems
	if !errors.As(err, &ps) || len(ps) != 1 {
		t.Fatalf("got %v, want one problem", err)
	}
	if p := ps[0]; p.Key != "classes.api.limits.default.algoritm" || p.Msg != "unknown key" || p.Hint != "did you mean algorithm?" {
		t.Errorf("got %+v", *p)
	}
}

func TestATiersLimitDirectlyUnderClassesIsNamedAsSuchAndPointsAtItsClass(t *testing.T) {
	_, err := Parse("x.yaml", []byte(`
classes:
  api:
    routes: ["GET /api/{path...}"]
  default: {algorithm: gcra, rate: 5, period: 1s}
`))
	var ps Problems
	if !errors.As(err, &ps) || len(ps) != 1 {
		t.Fatalf("got %v, want one problem", err)
	}
	if p := ps[0]; p.Key != "classes.default" || p.Msg != "tier default's limit directly under classes, where class names go, is not taken for a class" ||
		p.Hint != "indented one level too shallow? classes.api has no limits: did you mean classes.api.limits.default?" {
		t.Errorf("got %+v", *p)
	}
}
