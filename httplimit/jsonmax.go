package httplimit

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// jsonLargest is the value at the gjson path in a JSON document and whether a member on the path
// appears more than once. A duplicate is read as its largest number: JSON parsers disagree on
// which of two equal names wins (gjson takes the first, Python and Go the last), so the largest
// is the one reading a client or an upstream cannot shrink. Duplicates are looked for on paths of
// plain member names and array indexes ("usage.total_tokens", "choices.0.usage"); any other path
// is gjson's first match. A document without a duplicate is read by gjson alone.
func jsonLargest(doc []byte, path string) (gjson.Result, bool) {
	if !plainJSONPath(path) || !mayRepeat(doc, path[strings.LastIndexByte(path, '.')+1:]) {
		return gjson.GetBytes(doc, path), false
	}
	var best gjson.Result
	n := 0
	largestAt(gjson.ParseBytes(doc), path, &best, &n)
	return best, n > 1
}

// largestAt walks v along path, keeping in best the largest of the n values found at its end.
func largestAt(v gjson.Result, path string, best *gjson.Result, n *int) {
	name, rest, more := strings.Cut(path, ".")
	visit := func(member gjson.Result) {
		if more {
			largestAt(member, rest, best, n)
			return
		}
		*n++
		if *n == 1 || member.Type == gjson.Number && (best.Type != gjson.Number || member.Num > best.Num) {
			*best = member
		}
	}
	switch {
	case v.IsObject():
		v.ForEach(func(k, member gjson.Result) bool {
			if k.Str == name {
				visit(member)
			}
			return true
		})
	case v.IsArray():
		if _, err := strconv.Atoi(name); err == nil {
			if member := v.Get(name); member.Exists() {
				visit(member)
			}
		}
	}
}

// mayRepeat reports whether name may be a member more than once in doc: it is written there
// twice, or doc has \u escapes, which could spell it.
func mayRepeat(doc []byte, name string) bool {
	if bytes.Contains(doc, []byte(`\u`)) {
		return true
	}
	seen := 0
	for rest := doc; ; {
		i := bytes.Index(rest, []byte(name))
		if i < 0 {
			return false
		}
		if i > 0 && rest[i-1] == '"' && i+len(name) < len(rest) && rest[i+len(name)] == '"' {
			if seen++; seen > 1 {
				return true
			}
		}
		rest = rest[i+len(name):]
	}
}

// plainJSONPath reports whether a gjson path is member names and array indexes alone: letters,
// digits, '_' and '-' between dots.
func plainJSONPath(path string) bool {
	if path == "" || path[0] == '.' || path[len(path)-1] == '.' || strings.Contains(path, "..") {
		return false
	}
	for i := 0; i < len(path); i++ {
		c := path[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}
