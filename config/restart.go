package config

import (
	"reflect"
	"sort"
)

// reloadable are the top-level keys a reload applies without a restart:
// everything the rate-limit policy is compiled from.
var reloadable = map[string]bool{
	"tiers": true, "identity": true, "headers": true, "classes": true, "default_class": true,
	// The admin tokens are read again on a reload (the admin API itself is
	// served only when a token was configured at start).
	"admin": true,
}

// RestartRequired lists the keys that differ between old and new but that a
// reload does not apply (listeners, store, logs, metrics, tracing, live
// limits and reload settings): they take effect at the next
// start. Keys are named down to the second level ("server.listen",
// "store.redis").
func RestartRequired(old, new *Config) []string {
	var out []string
	ov, nv := reflect.ValueOf(*old), reflect.ValueOf(*new)
	t := ov.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("koanf")
		if tag == "" || tag == "-" || reloadable[tag] {
			continue
		}
		a, b := ov.Field(i), nv.Field(i)
		if reflect.DeepEqual(a.Interface(), b.Interface()) {
			continue
		}
		if f.Type.Kind() != reflect.Struct {
			out = append(out, tag)
			continue
		}
		for j := 0; j < f.Type.NumField(); j++ {
			if !reflect.DeepEqual(a.Field(j).Interface(), b.Field(j).Interface()) {
				out = append(out, tag+"."+f.Type.Field(j).Tag.Get("koanf"))
			}
		}
	}
	sort.Strings(out)
	return out
}
