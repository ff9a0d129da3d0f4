package config

import (
	"fmt"
	"math"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/knadh/koanf/parsers/yaml"
)

// fuzzFile is the name the fuzzed files are parsed under; every error must
// name it.
const fuzzFile = "fuzz.yaml"

// FuzzParse parses any file as a configuration. It never panics; a file it
// refuses gets errors that each name the file; a file with a key the
// configuration does not have is refused; and a file it accepts gives a
// configuration with finite numbers only, that validates again and that
// parsing the same file again reproduces exactly.
func FuzzParse(f *testing.F) {
	for _, path := range []string{"../config.example.yaml", "../examples/demo.yaml"} {
		if b, err := os.ReadFile(path); err == nil {
			f.Add(b)
		}
	}
	for _, seed := range []string{
		"",
		"server:\n  listen: \":9\"\n",
		"classes:\n  api:\n    routes: [\"GET /api/{id}\"]\n    limits:\n      default: {algorithm: gcra, rate: 5, period: 1s, burst: 10}\n",
		"classes:\n  api:\n    limits:\n      default: {algorithm: sliding_window, rate: 1, period: 2000000h}\n",
		"classes:\n  a.b:\n    limits: {default: {algorithm: fixed_window, rate: 1, period: 1m}}\n",
		"store:\n  type: redis\n",
		"store: {timeout: -1s}\n",
		"server: {listen: 8080}\n",
		"tiers: {names: [free, pro], default: free, keys: {alice: pro}}\n",
		"unknown: 1\n",
		"metrics: {near_limit_share: .nan}\n",
		"headers: [1, 2]\n",
		"- a\n- b\n",
		"{",
		"classes: {x: {limits: {default: {rate: 9223372036854775807, period: 1ms, algorithm: token_bucket}}}}\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(fuzzFile, data)
		if err != nil {
			for _, e := range leafErrors(err) {
				if !strings.Contains(e.Error(), fuzzFile) {
					t.Fatalf("file %q: error %q does not name the file", data, e)
				}
			}
			return
		}
		if unknown := unknownKey(data); unknown != "" {
			t.Fatalf("file %q: accepted with the unknown key %q", data, unknown)
		}
		if field := nonFinite(reflect.ValueOf(*c), ""); field != "" {
			t.Fatalf("file %q: accepted with %s not a finite number", data, field)
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("file %q: accepted, then does not validate: %v", data, err)
		}
		again, err := Parse(fuzzFile, data)
		if err != nil {
			t.Fatalf("file %q: accepted once, refused the second time: %v", data, err)
		}
		if !reflect.DeepEqual(c, again) {
			t.Fatalf("file %q: two parses differ:\n%+v\n%+v", data, c, again)
		}
	})
}

// nonFinite returns the path of a float field of v that is NaN or
// infinite, or "".
func nonFinite(v reflect.Value, path string) string {
	switch v.Kind() {
	case reflect.Float32, reflect.Float64:
		if f := v.Float(); math.IsNaN(f) || math.IsInf(f, 0) {
			return path
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if p := nonFinite(v.Field(i), path+"."+v.Type().Field(i).Name); p != "" {
				return p
			}
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			if p := nonFinite(it.Value(), fmt.Sprintf("%s[%v]", path, it.Key())); p != "" {
				return p
			}
		}
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			if p := nonFinite(v.Index(i), fmt.Sprintf("%s[%d]", path, i)); p != "" {
				return p
			}
		}
	}
	return ""
}

// leafErrors flattens errors.Join trees into their leaves.
func leafErrors(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, leafErrors(e)...)
		}
		return out
	}
	return []error{err}
}

// unknownKey returns a key of the YAML document data that names no field of
// Config (following koanf tags through structs and map values), or "" when
// every key is known or the document is out of scope: not a YAML mapping,
// or holding a key with a '.', which koanf reads as a path.
func unknownKey(data []byte) string {
	doc, err := yaml.Parser().Unmarshal(data)
	if err != nil {
		return ""
	}
	var walk func(v any, t reflect.Type, path string) (unknown string, outOfScope bool)
	walk = func(v any, t reflect.Type, path string) (string, bool) {
		m, isMap := v.(map[string]any)
		if !isMap {
			return "", false
		}
		var unknown string
		for k, sub := range m {
			if strings.Contains(k, ".") {
				return "", true
			}
			for t.Kind() == reflect.Pointer {
				t = t.Elem()
			}
			var next reflect.Type
			switch t.Kind() {
			case reflect.Struct:
				if idx, ok := taggedField(t, k); ok {
					next = t.FieldByIndex(idx).Type
				}
			case reflect.Map:
				next = t.Elem()
			default:
				continue // a scalar or list given a map: a type error, not an unknown key
			}
			if next == nil {
				unknown = strings.TrimPrefix(path+"."+k, ".")
				continue
			}
			u, out := walk(sub, next, path+"."+k)
			if out {
				return "", true
			}
			if u != "" {
				unknown = u
			}
		}
		return unknown, false
	}
	u, out := walk(doc, reflect.TypeOf(Config{}), "")
	if out {
		return ""
	}
	return u
}

// FuzzEnvOverride sets one RL_ variable over the built-in defaults. It never
// panics; a variable whose name or value is refused is named in the error,
// and so is it on every line of a validation error that names its key; and
// a variable that is accepted sets its key: the loaded configuration holds
// the value (unless it is its type's zero value, which means "the default"
// in the configuration).
func FuzzEnvOverride(f *testing.F) {
	for _, seed := range [][2]string{
		{"SERVER__LISTEN", ":9"},
		{"SERVER__SHUTDOWN_TIMEOUT", "3s"},
		{"SERVER__SHUTDOWN_TIMEOUT", "3"},
		{"STORE__TYPE", "redis"},
		{"STORE__REDIS__URL", "redis://127.0.0.1:1/0"},
		{"STORE__TIMEOUT", "-5ms"},
		{"METRICS__TOP_KEYS", "9223372036854775808"},
		{"METRICS__NEAR_LIMIT_SHARE", "NaN"},
		{"HEADERS__LEGACY", "yes"},
		{"TIERS__NAMES", "free, pro,,"},
		{"TIERS__KEYS", "alice=pro,bob"},
		{"CLASSES__DEFAULT__LIMITS__DEFAULT__RATE", "7"},
		{"CLASSES__DEFAULT__ROUTES", "GET /a,GET /b"},
		{"SERVER", "x"},
		{"SERVER____LISTEN", "x"},
		{"NOPE", "1"},
		{"LOG__LEVEL", "debug"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, suffix, value string) {
		if strings.Contains(suffix, "=") {
			return // the name would end at the '='
		}
		name := EnvPrefix + suffix
		env := []string{name + "=" + value}
		ovs, err := EnvOverrides(env)
		if err != nil {
			if !strings.Contains(err.Error(), name) {
				t.Fatalf("%s=%q: error %q does not name the variable", name, value, err)
			}
			return
		}
		parts := strings.Split(strings.ToLower(suffix), "__")
		key := strings.Join(parts, ".")
		if len(ovs) != 1 || ovs[0].Key != key || ovs[0].From != name {
			t.Fatalf("%s=%q: overrides %+v, want one for key %q from %s", name, value, ovs, key, name)
		}
		c, err := Sources{Env: env}.Load()
		if err != nil {
			// Every problem that names the key says which variable set it.
			for _, line := range strings.Split(err.Error(), "\n") {
				if strings.Contains(line, key) && !strings.Contains(line, name) {
					t.Fatalf("%s=%q: error line %q names %s but not the variable that set it", name, value, line, key)
				}
			}
			if !strings.Contains(err.Error(), BuiltIn) {
				t.Fatalf("%s=%q: error %q does not name the configuration's source", name, value, err)
			}
			return
		}
		got, ok := valueAt(reflect.ValueOf(*c), parts)
		if !ok {
			t.Fatalf("%s=%q: accepted, but %s is not in the loaded configuration", name, value, key)
		}
		if want, set := envValue(got.Type(), value); set && !reflect.DeepEqual(got.Interface(), want) {
			t.Fatalf("%s=%q: %s is %#v, want %#v", name, value, key, got.Interface(), want)
		}
	})
}

// valueAt follows koanf tags and map keys from v along path.
func valueAt(v reflect.Value, path []string) (reflect.Value, bool) {
	for _, p := range path {
		switch v.Kind() {
		case reflect.Struct:
			idx, found := taggedField(v.Type(), p)
			if !found {
				return reflect.Value{}, false
			}
			v = v.FieldByIndex(idx)
		case reflect.Map:
			e := v.MapIndex(reflect.ValueOf(p).Convert(v.Type().Key()))
			if !e.IsValid() {
				return reflect.Value{}, false
			}
			v = e
		default:
			return reflect.Value{}, false
		}
	}
	return v, true
}

// envValue is what the variable's text s means for a field of type t, as
// the configuration documents it, and whether it is not the type's zero
// value (a zero value asks for the default, which may differ).
func envValue(t reflect.Type, s string) (any, bool) {
	if t == reflect.TypeOf(time.Duration(0)) {
		d, err := time.ParseDuration(s)
		return d, err == nil && d != 0
	}
	var v reflect.Value
	switch t.Kind() {
	case reflect.String:
		v = reflect.ValueOf(s).Convert(t)
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return nil, false
		}
		v = reflect.ValueOf(b)
	case reflect.Int, reflect.Int64:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, false
		}
		v = reflect.ValueOf(n).Convert(t)
	case reflect.Float64:
		x, err := strconv.ParseFloat(s, 64)
		if err != nil || x != x { // NaN equals nothing
			return nil, false
		}
		v = reflect.ValueOf(x)
	case reflect.Slice:
		if t.Elem().Kind() != reflect.String {
			return nil, false
		}
		l := reflect.MakeSlice(t, 0, 0)
		for _, e := range strings.Split(s, ",") {
			if e = strings.TrimSpace(e); e != "" {
				l = reflect.Append(l, reflect.ValueOf(e).Convert(t.Elem()))
			}
		}
		v = l
	default:
		return nil, false // maps merge with what is there: not one value
	}
	if v.IsZero() || (v.Kind() == reflect.Slice && v.Len() == 0) {
		return nil, false
	}
	return v.Interface(), true
}

// taggedField is the index path of the field of struct t tagged key,
// looking into the structs embedded with ",squash", whose keys are the
// block's own.
func taggedField(t reflect.Type, key string) ([]int, bool) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("koanf")
		if f.Anonymous && tag == ",squash" {
			if idx, ok := taggedField(f.Type, key); ok {
				return append([]int{i}, idx...), true
			}
			continue
		}
		if tag == key && tag != "-" {
			return []int{i}, true
		}
	}
	return nil, false
}
