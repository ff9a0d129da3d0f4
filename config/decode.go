package config

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

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
			s := data.(string)
			d, err := time.ParseDuration(s)
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

var (
	// decodeLine is one problem of the decoder's report: 'key' reason.
	decodeLine = regexp.MustCompile(`^'([^']*)' (.*)$`)
	// invalidKeys is the decoder's report of unknown keys under a key.
	invalidKeys = regexp.MustCompile(`^'([^']*)' has invalid keys: (.*)$`)
	// indexPart turns classes[public] into classes.public.
	indexPart = strings.NewReplacer("[", ".", "]", "")
)

// decodeErrors turns the decoder's multi-line report into one error per
// problem, each "config FILE: key: reason", as validation reports them.
func decodeErrors(name string, err error) error {
	var out []error
	add := func(key, reason string) {
		if key == "" {
			out = append(out, fmt.Errorf("config %s: %s", name, reason))
			return
		}
		out = append(out, fmt.Errorf("config %s: %s: %s", name, key, reason))
	}
	for _, l := range strings.Split(err.Error(), "\n") {
		l = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "* "))
		if l == "" || strings.HasSuffix(l, "error(s):") || strings.HasSuffix(l, "error(s) decoding:") {
			continue
		}
		if m := invalidKeys.FindStringSubmatch(l); m != nil {
			parent := indexPart.Replace(m[1])
			if m[1] == reflect.TypeOf(Config{}).String() {
				parent = "" // the top level is named by its Go type
			}
			for _, k := range strings.Split(m[2], ",") {
				k = strings.TrimSpace(k)
				if parent != "" {
					k = parent + "." + k
				}
				add(k, "unknown key")
			}
			continue
		}
		if m := decodeLine.FindStringSubmatch(l); m != nil {
			add(indexPart.Replace(m[1]), strings.ReplaceAll(m[2], "'", ""))
			continue
		}
		add("", l)
	}
	if len(out) == 0 {
		return fmt.Errorf("config %s: %w", name, err)
	}
	return errors.Join(out...)
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
