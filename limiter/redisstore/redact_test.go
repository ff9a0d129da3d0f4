package redisstore_test

import (
	"strings"
	"testing"

	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
)

func TestRedactURLHidesThePasswordOfAnyString(t *testing.T) {
	for raw, want := range map[string]string{
		"redis://default:Tr0ub4dor%3&3@host:6379":  "redis://default:xxxxx@host:6379",
		"redis://default:s3cr#t/pa?ss@host:6379/0": "redis://default:xxxxx@host:6379/0",
		"rediss://:p@ss@host:6379":                 "rediss://:xxxxx@host:6379",
		"redis://host:6379/0":                      "redis://host:6379/0",
		"redis://user@host:6379":                   "redis://user@host:6379",
		"not a url":                                "not a url",
	} {
		if got := redisstore.RedactURL(raw); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", raw, got, want)
		}
	}
}

func TestParseURLErrorsNeverQuoteThePassword(t *testing.T) {
	for _, raw := range []string{
		"redis://default:Tr0ub4dor%3&3@host:6379",
		"redis://default:s3cr#t-pass@host:6379/0",
		"redis://default:pa%zzword@host%zz:6379",
	} {
		_, err := redisstore.ParseURL(raw)
		if err == nil {
			t.Fatalf("ParseURL(%q): no error", raw)
		}
		for _, secret := range []string{"Tr0ub4dor", "s3cr", "pa%zz"} {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("ParseURL(%q): %v: shows the password", raw, err)
			}
		}
	}
	if _, err := redisstore.ParseURL("redis://default:fine@host:6379/0"); err != nil {
		t.Errorf("a valid URL: %v", err)
	}
}
