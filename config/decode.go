package config

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/knadh/koanf/v2"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// strictNumbers is the decode hook for numbers and durations. It refuses
// what the decoder would otherwise convert silently: a fraction or an
// out-of-range number for an integer (rate: 1.5 would become 1, a rate
// past 2^63 a negative one), and a bare number for a duration (timeout:
// 100 would be 100 ns). Durations are parsed here so that an error shows
// the value.
func strictNumbers(from, to reflect.Type, data any) (any, error) {
	if to == durationType {
		if from == durationType {
			return data, nil
		}
		switch from.Kind() {
		case reflect.String:
			s := reflect.ValueOf(data).String()
			d, err := time.ParseDuration(s)
			if err != nil && from == limitPeriodType {
				return nil, &hintedError{fmt.Sprintf("%q is neither a Go duration (such as 1m, 24h) nor day, week, month or year", s), durationHint(s, true)}
			}
			if err != nil {
				return nil, &hintedError{fmt.Sprintf("%q is not a Go duration (such as 500ms, 1m30s)", s), durationHint(s, false)}
			}
			return d, nil
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
			reflect.Float32, reflect.Float64:
			return nil, fmt.Errorf("%v is a number without a unit; write a Go duration such as %vs or %vms", data, data, data)
		}
		return data, nil
	}
	switch to.Kind() {
	case reflect.Int, reflect.Int64:
		switch v := data.(type) {
		case float64:
			if v != math.Trunc(v) {
				return nil, fmt.Errorf("%v is not a whole number", v)
			}
			if v < math.MinInt64 || v >= math.MaxInt64 {
				return nil, fmt.Errorf("%v is out of range", v)
			}
		case float32:
			if float64(v) != math.Trunc(float64(v)) {
				return nil, fmt.Errorf("%v is not a whole number", v)
			}
		case uint64:
			if v > math.MaxInt64 {
				return nil, fmt.Errorf("%v is out of range", v)
			}
		case uint:
			if uint64(v) > math.MaxInt64 {
				return nil, fmt.Errorf("%v is out of range", v)
			}
		}
	}
	return data, nil
}

// hintedError is a decode hook's error that knows what was probably
// meant (FieldError.Hint).
type hintedError struct{ msg, hint string }

func (e *hintedError) Error() string { return e.msg }

// durationUnits are the unit words people write for Go's duration units.
var durationUnits = map[string]string{
	"ms": "ms", "msec": "ms", "millisecond": "ms", "milliseconds": "ms",
	"s": "s", "sec": "s", "secs": "s", "second": "s", "seconds": "s",
	"m": "m", "min": "m", "mins": "m", "minute": "m", "minutes": "m",
	"h": "h", "hr": "h", "hrs": "h", "hour": "h", "hours": "h",
	"d": "d", "day": "d", "days": "d",
}

// durationHint is "did you mean 1m?" for a duration written in words
// ("1 minute", "30 secs", "2 days"); "" when s is not such a one. A limit's
// period of one day is the calendar's day.
func durationHint(s string, period bool) string {
	num := strings.TrimRightFunc(strings.TrimSpace(s), func(r rune) bool { return r < '0' || r > '9' })
	word := strings.ToLower(strings.TrimSpace(strings.TrimSpace(s)[len(num):]))
	n, err := strconv.Atoi(num)
	unit, ok := durationUnits[word]
	if err != nil || !ok || n < 1 {
		return ""
	}
	switch {
	case unit == "d" && n == 1 && period:
		return "did you mean day?"
	case unit == "d":
		return fmt.Sprintf("did you mean %dh?", 24*n)
	}
	return fmt.Sprintf("did you mean %d%s?", n, unit)
}

// indexPart turns the decoder's classes[public] into classes.public.
var indexPart = strings.NewReplacer("[", ".", "]", "")

// decodeErrors turns the decoder's error tree into one problem per value
// that did not decode. It reads the decoder's typed errors (the key a
// DecodeError names, the expected type and the value of a conversion
// error), never their messages.
func decodeErrors(name string, err error) Problems {
	var out Problems
	var walk func(error)
	walk = func(e error) {
		switch t := e.(type) {
		case interface{ Unwrap() []error }:
			for _, x := range t.Unwrap() {
				walk(x)
			}
			return
		case *mapstructure.DecodeError:
			inner := t.Unwrap()
			if _, joined := inner.(interface{ Unwrap() []error }); joined {
				walk(inner)
				return
			}
			if _, nested := inner.(*mapstructure.DecodeError); nested {
				walk(inner)
				return
			}
			p := &FieldError{Source: name, Key: fileKey(indexPart.Replace(t.Name())), Msg: decodeReason(inner)}
			var h *hintedError
			if errors.As(inner, &h) {
				p.Hint = h.hint
			}
			out = append(out, p)
			return
		}
		if u := errors.Unwrap(e); u != nil {
			walk(u) // the decoder's "decoding failed due to..." wrapper
			return
		}
		out = append(out, &FieldError{Source: name, Msg: e.Error()})
	}
	walk(err)
	return out
}

// decodeReason says why a value did not decode, from the decoder's typed
// conversion errors; other errors (the decode hooks' own) as they are.
func decodeReason(err error) string {
	switch e := err.(type) {
	case *mapstructure.UnconvertibleTypeError:
		return fmt.Sprintf("expected type %s, got %s", e.Expected.Type(), describeValue(e.Value))
	case *mapstructure.ParseError:
		return fmt.Sprintf("expected type %s, got %s (%v)", e.Expected.Type(), describeValue(e.Value), e.Err)
	}
	return err.Error()
}

// describeValue names a value of the file for an error message: a string
// quoted, a list or a map by its kind, anything else as written.
func describeValue(v any) string {
	switch x := v.(type) {
	case string:
		return fmt.Sprintf("the string %q", x)
	case nil:
		return "nothing"
	}
	switch reflect.TypeOf(v).Kind() {
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map:
		return "a map"
	case reflect.Bool:
		return fmt.Sprintf("the boolean %v", v)
	}
	return fmt.Sprintf("the number %v", v)
}

// unknownKeys returns an "unknown key" problem for every key of raw (the
// merged defaults, file and environment, as nested maps) that names no
// field of t, found by walking t's koanf tags: a struct accepts its
// fields' names, a map any key (its values are checked against the map's
// element type), a list checks each element. A value that is not a map
// where a struct or map is expected is left to the decoder, which reports
// its type. A key within an edit distance of 2 of a field's name is
// suggested, and stands for that field when the file does not set it.
func unknownKeys(name string, raw map[string]any, t reflect.Type) Problems {
	var out Problems
	var walk func(v any, t reflect.Type, path string)
	walk = func(v any, t reflect.Type, path string) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch t.Kind() {
		case reflect.Struct:
			if l, ok := v.([]any); ok && t == limitType {
				for i, e := range l { // a tier's list of limits (tierLists)
					walk(e, namedLimitType, fmt.Sprintf("%s[%d]", path, i))
				}
				return
			}
			m, ok := v.(map[string]any)
			if !ok || t == durationType {
				return
			}
			for _, k := range slices.Sorted(maps.Keys(m)) {
				f, ok := fieldByTag(t, k)
				if !ok {
					p := &FieldError{Source: name, Key: join(path, k), Msg: "unknown key"}
					if near := nearest(k, fieldTags(t)); near != "" {
						p.Hint = "did you mean " + near + "?"
						if _, set := m[near]; !set {
							p.covers = join(path, near)
						}
					}
					out = append(out, p)
					continue
				}
				walk(m[k], f.Type, join(path, k))
			}
		case reflect.Map:
			if m, ok := v.(map[string]any); ok {
				for _, k := range slices.Sorted(maps.Keys(m)) {
					walk(m[k], t.Elem(), join(path, k))
				}
			}
		case reflect.Slice, reflect.Array:
			if l, ok := v.([]any); ok {
				for i, e := range l {
					walk(e, t.Elem(), join(path, strconv.Itoa(i)))
				}
			}
		}
	}
	walk(raw, t, "")
	return out
}

// keyField is a field of a struct that a key of a file names: Key is its
// koanf tag, Index its path from the struct (reflect.Value.FieldByIndex).
type keyField struct {
	reflect.StructField
	Key string
}

// keyFields are the fields of struct t that a file's keys name, in
// order, those of a struct embedded with ",squash" (a domain package's
// struct whose keys are the block's, as limiter.Penalty is a class's
// penalty) in its place, as the decoder reads them.
func keyFields(t reflect.Type) []keyField {
	var out []keyField
	for i := range t.NumField() {
		f := t.Field(i)
		tag, opts, _ := strings.Cut(f.Tag.Get("koanf"), ",")
		switch {
		case !f.IsExported() || tag == "-":
		case tag == "" && f.Anonymous && opts == "squash" && f.Type.Kind() == reflect.Struct:
			for _, inner := range keyFields(f.Type) {
				inner.Index = append([]int{i}, inner.Index...)
				out = append(out, inner)
			}
		case tag != "":
			out = append(out, keyField{StructField: f, Key: tag})
		}
	}
	return out
}

// fieldByTag is the field of struct t whose koanf tag is key, exactly; a
// field tagged derived is set from another key, never written in a file.
func fieldByTag(t reflect.Type, key string) (reflect.StructField, bool) {
	for _, f := range keyFields(t) {
		if f.Key == key && f.Tag.Get("derived") == "" {
			return f.StructField, true
		}
	}
	return reflect.StructField{}, false
}

// fieldTags are the keys a file may set in struct t.
func fieldTags(t reflect.Type) []string {
	var out []string
	for _, f := range keyFields(t) {
		if f.Tag.Get("derived") == "" {
			out = append(out, f.Key)
		}
	}
	return out
}

var classType = reflect.TypeOf(Class{})

// misplacedBlocks finds what belongs in a class but is written directly
// under classes, where only class names go — a class's block (limits:
// indented one level too shallow) or a tier's limit (free: {algorithm:
// ...}) — and returns a problem for each and k without them, so that none
// is taken for a class. A key is a class's block when it is a class key
// whose value is not shaped like a class; a tier's limit when its value is
// shaped like a limit and not like a class.
func misplacedBlocks(name string, k *koanf.Koanf) (Problems, *koanf.Koanf) {
	classes, _ := k.Raw()["classes"].(map[string]any)
	var out Problems
	for _, n := range slices.Sorted(maps.Keys(classes)) {
		_, classKey := fieldByTag(classType, n)
		what, path := "a class's "+n+" block", n // where it belongs in a class
		switch {
		case classKey && !shapedLike(classes[n], classType):
		case !classKey && shapedLike(classes[n], limitType) && !shapedLike(classes[n], classType):
			what, path = "tier "+n+"'s limit", "limits."+n
		default:
			continue
		}
		p := &FieldError{Source: name, Key: "classes." + n,
			Msg:  what + " directly under classes, where class names go, is not taken for a class",
			Hint: "indented one level too shallow? it belongs under its class, classes.<name>." + path}
		// The class it was meant for is probably the one class without it.
		top, _, _ := strings.Cut(path, ".")
		var lacking []string
		for _, other := range slices.Sorted(maps.Keys(classes)) {
			if m, ok := classes[other].(map[string]any); ok && shapedLike(m, classType) && m[top] == nil {
				lacking = append(lacking, other)
			}
		}
		if len(lacking) == 1 {
			p.Hint = fmt.Sprintf("indented one level too shallow? classes.%s has no %s: did you mean classes.%s.%s?", lacking[0], top, lacking[0], path)
			p.covers = "classes." + lacking[0] + "." + top
		}
		out = append(out, p)
	}
	if len(out) > 0 {
		k = k.Copy()
		for _, p := range out {
			k.Delete(p.Key)
		}
	}
	return out, k
}

// shapedLike reports whether v is a map of t's keys (a class's, a limit's).
func shapedLike(v any, t reflect.Type) bool {
	m, ok := v.(map[string]any)
	if !ok {
		return false
	}
	for key := range m {
		if _, ok := fieldByTag(t, key); !ok {
			return false
		}
	}
	return true
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// oneLine folds a multi-line message (the YAML parser's "unmarshal
// errors:" list) into one line, so that each problem is one line.
func oneLine(msg string) string {
	return strings.Join(strings.Fields(msg), " ")
}

// limitProblems returns every problem of a limit, each naming the field
// at fault, instead of the first one alone: each field found at fault is
// set to a valid stand-in and the limit checked again, so one pass over a
// file reports all of them.
func limitProblems(l limiter.Limit, cost int64) []*limiter.FieldError {
	var out []*limiter.FieldError
	for range 6 { // one round per field, at most
		err := ValidateLimit(l, cost)
		if err == nil {
			break
		}
		var fe *limiter.FieldError
		if !errors.As(err, &fe) {
			return append(out, &limiter.FieldError{Field: "", Err: err})
		}
		out = append(out, fe)
		switch fe.Field {
		case "algorithm":
			l.Algorithm = limiter.FixedWindow
		case "rate":
			l.Rate = 1
		case "period":
			l.Period = time.Second
		case "burst":
			l.Burst = 0
		default:
			return out
		}
	}
	return out
}

var estimateType = reflect.TypeOf(Estimate{})

// estimateFromNumber lets a class write estimate: 300 for {default: 300}.
func estimateFromNumber(from, to reflect.Type, data any) (any, error) {
	if to != estimateType && to != reflect.PointerTo(estimateType) {
		return data, nil
	}
	switch from.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return map[string]any{"default": data}, nil
	}
	return data, nil
}
