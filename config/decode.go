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
				return nil, fmt.Errorf("%q is neither a Go duration (such as 1m, 24h) nor day, week, month or year", s)
			}
			if err != nil {
				return nil, fmt.Errorf("%q is not a Go duration (such as 500ms, 1m30s)", s)
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

// indexPart turns the decoder's classes[public] into classes.public.
var indexPart = strings.NewReplacer("[", ".", "]", "")

// decodeErrors turns the decoder's error tree into one error per problem,
// each "config FILE: key: reason", as validation reports them. It reads
// the decoder's typed errors (the key a DecodeError names, the expected
// type and the value of a conversion error), never their messages.
func decodeErrors(name string, err error) []error {
	var out []error
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
			out = append(out, problem(name, indexPart.Replace(t.Name()), decodeReason(inner)))
			return
		}
		if u := errors.Unwrap(e); u != nil {
			walk(u) // the decoder's "decoding failed due to..." wrapper
			return
		}
		out = append(out, problem(name, "", e.Error()))
	}
	walk(err)
	return out
}

// problem is one "config FILE: key: reason" error ("config FILE: reason"
// without a key).
func problem(name, key, reason string) error {
	if key == "" {
		return fmt.Errorf("config %s: %s", name, reason)
	}
	return fmt.Errorf("config %s: %s: %s", name, key, reason)
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
// its type.
func unknownKeys(name string, raw map[string]any, t reflect.Type) []error {
	var out []error
	var walk func(v any, t reflect.Type, path string)
	walk = func(v any, t reflect.Type, path string) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch t.Kind() {
		case reflect.Struct:
			m, ok := v.(map[string]any)
			if !ok || t == durationType {
				return
			}
			for _, k := range slices.Sorted(maps.Keys(m)) {
				f, ok := fieldByTag(t, k)
				if !ok {
					out = append(out, problem(name, join(path, k), "unknown key"))
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

// fieldByTag is the field of struct t whose koanf tag is key, exactly; a
// field tagged derived is set from another key, never written in a file.
func fieldByTag(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("koanf"), ",")
		if f.IsExported() && tag != "-" && tag == key && f.Tag.Get("derived") == "" {
			return f, true
		}
	}
	return reflect.StructField{}, false
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

// limitProblems returns every problem of a limit, each starting with the
// field at fault ("rate: must be > 0"), instead of the first one alone:
// each field found at fault is set to a valid stand-in and the limit
// checked again, so one pass over a file reports all of them.
func limitProblems(l limiter.Limit, cost int64) []error {
	var out []error
	for range 6 { // one round per field, at most
		err := ValidateLimit(l, cost)
		if err == nil {
			break
		}
		out = append(out, err)
		field, _, _ := strings.Cut(err.Error(), ":")
		switch field {
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

// mergeDecodeAndValidate joins the decoder's problems with validation's,
// leaving out validation problems on keys the decoder already reported
// (a rate that is not a number is not also "must be > 0").
func mergeDecodeAndValidate(decoded, validated error) error {
	if validated == nil {
		return decoded
	}
	var keys []string
	for _, e := range problemList(decoded) {
		keys = append(keys, problemKey(e.Error()))
	}
	out := problemList(decoded)
	for _, e := range problemList(validated) {
		k := problemKey(e.Error())
		if k != "" && slices.ContainsFunc(keys, func(d string) bool {
			return d == k || strings.HasPrefix(k, d+".")
		}) {
			continue
		}
		out = append(out, e)
	}
	return errors.Join(out...)
}

// problemList unwraps a joined error into its problems.
func problemList(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// problemKey is the key of a "config FILE: key: reason" problem.
func problemKey(msg string) string {
	parts := strings.SplitN(msg, ": ", 3)
	if len(parts) < 3 {
		return ""
	}
	return parts[1]
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
