package config

import (
	"cmp"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// FieldError is one problem of a configuration: the key at fault as the
// file spells it ("classes.api.limits.free.period"; "" for the file as a
// whole), what is wrong, and a hint ("did you mean algorithm?", or where a
// misplaced block belongs; "" when there is none). A plain value.
//
// Every check of a file reports through it, so that one pass names every
// mistake, each once:
//   - a check is a method of Config called from Validate (or, for what
//     only the raw file shows, from FromKoanf) that calls e.add(key,
//     format, args...) — e.addHint with a suggestion, suggest finds one
//     among the names the key allows — for each problem and goes on; it
//     never stops at the first one;
//   - the problems of a domain value (limiter.Limit, LeaseLimit, Penalty)
//     come as a *limiter.FieldError: take the key from its Field with
//     errors.As, never from the message's text;
//   - a problem on a key the decoder already reported (a value that did
//     not decode, or a misspelt key whose suggestion is this key: covers)
//     is left out by mergeProblems, so a mistake is not told twice.
type FieldError struct {
	// Source is the file (or BuiltIn).
	Source string
	// Key is the dotted key at fault; "" for the file as a whole.
	Key string
	// Msg says what is wrong.
	Msg string
	// Hint says what was probably meant; "" when nothing is near.
	Hint string
	// SetBy names the environment variables or flags that set the key,
	// when not the file.
	SetBy []string
	// covers is a key whose own problems this one explains (the key a
	// misspelt one stands for), left out when both are found.
	covers string
}

// Error is "config FILE: key: message; hint (set by --flag)", the form every problem
// of a file is printed in.
func (e *FieldError) Error() string {
	var b strings.Builder
	b.WriteString("config " + e.Source + ": ")
	if e.Key != "" {
		b.WriteString(e.Key + ": ")
	}
	b.WriteString(e.Msg)
	if e.Hint != "" {
		b.WriteString("; " + e.Hint)
	}
	if len(e.SetBy) > 0 {
		b.WriteString(" (set by " + strings.Join(e.SetBy, ", ") + ")")
	}
	return b.String()
}

// Problems is every problem of a configuration, in the order found. As
// an error it is one problem per line, as errors.Join prints them; read
// it with errors.As to reach each FieldError.
type Problems []*FieldError

// Error is one problem per line.
func (p Problems) Error() string {
	lines := make([]string, len(p))
	for i, e := range p {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap returns the problems, for errors.Is and errors.As.
func (p Problems) Unwrap() []error {
	out := make([]error, len(p))
	for i, e := range p {
		out[i] = e
	}
	return out
}

// sorted returns p in the order of the file's sections (server, log,
// store, tiers, identity ... as Config declares them), and by key within
// a section, so that the problems of one class or limit stand together.
func (p Problems) sorted() Problems {
	sections := fieldTags(reflect.TypeOf(Config{}))
	section := func(key string) int {
		top, _, _ := strings.Cut(key, ".")
		top, _, _ = strings.Cut(top, "[")
		return slices.Index(sections, top)
	}
	out := slices.Clone(p)
	slices.SortStableFunc(out, func(a, b *FieldError) int {
		return cmp.Or(cmp.Compare(section(a.Key), section(b.Key)), strings.Compare(a.Key, b.Key))
	})
	return out
}

// err is p as an error: nil when there is no problem.
func (p Problems) err() error {
	if len(p) == 0 {
		return nil
	}
	return p
}

// errs collects the problems of one file; see FieldError for how a check
// adds to it.
type errs struct {
	source string
	list   Problems
}

// add records a problem of key.
func (e *errs) add(key, format string, args ...any) {
	e.addHint(key, "", format, args...)
}

// addHint records a problem of key with a hint; an empty hint is none.
func (e *errs) addHint(key, hint, format string, args ...any) {
	e.list = append(e.list, &FieldError{Source: e.source, Key: key, Msg: fmt.Sprintf(format, args...), Hint: hint})
}

// addField records err as a problem under key: of key.Field when err is a
// *limiter.FieldError (a domain value's or a converter's, naming the field
// at fault), else of key itself.
func (e *errs) addField(key string, err error) {
	var fe *limiter.FieldError
	if errors.As(err, &fe) {
		key, err = joinKey(key, fe.Field), fe.Err
	}
	e.add(key, "%v", err)
}

// joinKey is the dotted key of field under key; either may be empty.
func joinKey(key, field string) string {
	if key == "" || field == "" {
		return key + field
	}
	return key + "." + field
}

func (e *errs) err() error { return e.list.err() }

// mergeProblems joins what the decoder found (decoded: unknown and
// misplaced keys, values that did not decode) with validation's
// problems, leaving out validation problems on a key the decoder already
// reported or one of its problems covers (a rate that is not a number is
// not also "must be > 0"; a misspelt algoritm is not also "unknown
// algorithm \"\"").
func mergeProblems(decoded, validated Problems) Problems {
	told := func(key string) bool {
		for _, d := range decoded {
			for _, k := range []string{d.Key, d.covers} {
				if k != "" && (key == k || strings.HasPrefix(key, k+".")) {
					return true
				}
			}
		}
		return false
	}
	out := decoded
	for _, v := range validated {
		if v.Key == "" || !told(v.Key) {
			out = append(out, v)
		}
	}
	return out
}

// suggest returns "did you mean X?" for the nearest of candidates to got
// (nearest); "" when none is near.
func suggest(got string, candidates []string) string {
	if near := nearest(got, candidates); near != "" {
		return "did you mean " + near + "?"
	}
	return ""
}

// nearest is the candidate nearest to got at an edit distance of at most
// 2 (and at most half of got, so that a short name does not suggest an
// unrelated one), case aside; "" when none is that near.
func nearest(got string, candidates []string) string {
	best, bestD := "", 3
	for _, c := range candidates {
		if c == got {
			continue
		}
		if d := editDistance(strings.ToLower(got), strings.ToLower(c)); d < bestD && d <= len([]rune(got))/2 {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in runes.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev, cur := make([]int, len(rb)+1), make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
