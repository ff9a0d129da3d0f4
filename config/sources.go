package config

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/knadh/koanf/providers/confmap"
)

// EnvPrefix starts every environment variable the configuration reads. The
// rest of the name is the key, upper-cased, with "__" between levels:
// store.redis.pool_size is RL_STORE__REDIS__POOL_SIZE.
const EnvPrefix = "RL_"

// Override is one value set outside the file, by an environment variable or
// a command-line flag.
type Override struct {
	// Key is the configuration key ("store.redis.url").
	Key string
	// Value is the value, of the key's type (a string for durations).
	Value any
	// From names where it was set ("RL_STORE__REDIS__URL", "--redis-url"),
	// for error messages.
	From string
}

// Sources are the layers of a configuration, by increasing precedence:
// built-in defaults < File < Env < Flags. Sources is a plain value; Load
// may be called again (on a reload) and reads File afresh each time.
type Sources struct {
	// File is the YAML file; empty means the built-in defaults alone.
	File string
	// Env is the environment as "NAME=value" (os.Environ()); only the
	// EnvPrefix variables are read.
	Env []string
	// Flags are the command-line flags that were given, as overrides.
	Flags []Override
}

// Load reads the file, applies the environment and the flags over it,
// and validates the result. Errors name the file, the key and the reason,
// and the variable or flag that set a key.
func (s Sources) Load() (*Config, error) {
	name := BuiltIn
	var data []byte
	if s.File != "" {
		name = s.File
		b, err := os.ReadFile(s.File)
		if err != nil {
			return nil, fmt.Errorf("config %s: %w", s.File, err)
		}
		data = b
	}
	k, err := NewKoanf(name, data)
	if err != nil {
		return nil, err
	}
	env, err := EnvOverrides(s.Env)
	if err != nil {
		return nil, err
	}
	all := append(env, s.Flags...)
	classesBuiltIn := !k.Exists("classes")
	if classesBuiltIn {
		// Without classes in the file, the built-in class is what the
		// overrides change, as they would change a file's class.
		tier := k.String("tiers.default")
		for _, o := range all {
			if t, ok := o.Value.(string); ok && o.Key == "tiers.default" {
				tier = t
			}
		}
		if err := k.Load(confmap.Provider(map[string]any{"classes": builtInClasses(tier)}, "."), nil); err != nil {
			return nil, fmt.Errorf("config %s: %w", name, err)
		}
	}
	for _, layer := range [][]Override{env, s.Flags} {
		if len(layer) == 0 {
			continue
		}
		m := map[string]any{}
		for _, o := range layer {
			listed, err := overrideListEntry(k, o)
			if err != nil {
				return nil, fmt.Errorf("config %s: %w", name, err)
			}
			if !listed {
				m[o.Key] = o.Value
			}
		}
		if err := k.Load(confmap.Provider(m, "."), nil); err != nil {
			return nil, fmt.Errorf("config %s: %w", name, err)
		}
	}
	c, err := FromKoanf(name, k)
	if err != nil {
		return nil, annotate(err, all)
	}
	c.classesBuiltIn = classesBuiltIn
	if s.File != "" {
		c.Digest = sha256.Sum256(data)
		c.emptyFile = hasNoKeys(data)
	}
	return c, nil
}

// builtInClasses is the built-in class with its limit for tier, as a file
// would write it, so that overrides merge into it key by key.
func builtInClasses(tier string) map[string]any {
	return map[string]any{"default": map[string]any{"limits": map[string]any{tier: map[string]any{
		"algorithm": builtInLimit.Algorithm,
		"rate":      builtInLimit.Rate,
		"period":    builtInLimit.Period.String(),
	}}}}
}

// annotate says, on each problem of err that names an overridden key
// (its own key, or one its message names), where that key was set.
func annotate(err error, overrides []Override) error {
	var ps Problems
	if len(overrides) == 0 || !errors.As(err, &ps) {
		return err
	}
	out := make(Problems, len(ps))
	for i, p := range ps {
		q := *p
		for _, o := range overrides {
			if q.Key == o.Key || strings.Contains(q.Msg, o.Key) {
				q.SetBy = append(q.SetBy, o.From)
			}
		}
		out[i] = &q
	}
	return out
}

// EnvOverrides turns the EnvPrefix variables of environ ("NAME=value") into
// overrides, converting each value to its key's type. A variable naming no
// key, or a value of the wrong type, is an error naming the variable.
//
// Values: strings as they are; numbers and booleans as Go parses them;
// durations as Go durations ("1m30s"); lists comma-separated ("a,b");
// maps of strings as "k=v,k2=v2". Map keys (class and tier names) are
// lower-cased, as environment variable names are upper case.
func EnvOverrides(environ []string) ([]Override, error) {
	var out []Override
	for _, kv := range environ {
		name, val, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(name, EnvPrefix) {
			continue
		}
		parts := strings.Split(strings.ToLower(strings.TrimPrefix(name, EnvPrefix)), "__")
		key := strings.Join(parts, ".")
		t, err := typeAt(reflect.TypeOf(Config{}), parts)
		if err != nil {
			return nil, fmt.Errorf("environment %s: %s: %w", name, key, err)
		}
		v, err := convert(t, val)
		if err != nil {
			return nil, fmt.Errorf("environment %s: %s: %w", name, key, err)
		}
		out = append(out, Override{Key: key, Value: v, From: name})
	}
	return out, nil
}

var durationType = reflect.TypeOf(time.Duration(0))

// typeAt finds the type of the key path in t, following koanf tags and
// map elements.
func typeAt(t reflect.Type, path []string) (reflect.Type, error) {
	for i, p := range path {
		if p == "" {
			return nil, fmt.Errorf("empty key component")
		}
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch t.Kind() {
		case reflect.Struct:
			if t == limitType {
				// A key of the tier's limit, or the name of one of its
				// list's limits (overrideListEntry).
				lt, ok := limitTypeAt(p, i+1 < len(path))
				if !ok {
					return nil, fmt.Errorf("unknown key %q", strings.Join(path[:i+1], "."))
				}
				t = lt
				continue
			}
			found := false
			for _, f := range keyFields(t) {
				if f.Key == p {
					t, found = f.Type, true
					break
				}
			}
			if !found {
				return nil, fmt.Errorf("unknown key %q", strings.Join(path[:i+1], "."))
			}
		case reflect.Map:
			t = t.Elem()
		default:
			return nil, fmt.Errorf("%s is a %s, it has no key %q", strings.Join(path[:i], "."), t.Kind(), p)
		}
	}
	return t, nil
}

func convert(t reflect.Type, s string) (any, error) {
	if t == durationType {
		if _, err := time.ParseDuration(s); err != nil {
			return nil, fmt.Errorf("%q is not a Go duration (such as 500ms, 1m30s)", s)
		}
		return s, nil
	}
	switch t.Kind() {
	case reflect.String:
		return s, nil
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return nil, fmt.Errorf("%q is not a boolean", s)
		}
		return b, nil
	case reflect.Int, reflect.Int64:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not an integer", s)
		}
		return n, nil
	case reflect.Float64:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not a number", s)
		}
		return f, nil
	case reflect.Slice:
		if t.Elem().Kind() == reflect.String {
			var out []any
			for _, e := range strings.Split(s, ",") {
				if e = strings.TrimSpace(e); e != "" {
					out = append(out, e)
				}
			}
			return out, nil
		}
	case reflect.Map:
		if t.Elem().Kind() == reflect.String {
			out := map[string]any{}
			for _, e := range strings.Split(s, ",") {
				k, v, ok := strings.Cut(strings.TrimSpace(e), "=")
				if !ok || k == "" {
					return nil, fmt.Errorf("want k=v,k2=v2, got %q", s)
				}
				out[k] = v
			}
			return out, nil
		}
	}
	return nil, fmt.Errorf("a %s cannot be set from one variable; set its keys", t.Kind())
}
