package redisstore_test

import (
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
)

// hashTag is the part of a Redis key that Redis Cluster hashes, by the
// rule of the Cluster specification (written out here rather than taken
// from the store): the text between the first '{' and the first '}' after
// it when that text is not empty, else the whole key. ok is false in the
// second case.
func hashTag(key string) (tag string, ok bool) {
	open := strings.IndexByte(key, '{')
	if open < 0 {
		return key, false
	}
	end := strings.IndexByte(key[open+1:], '}')
	if end <= 0 {
		return key, false
	}
	return key[open+1 : open+1+end], true
}

// unescape inverts the key escaping documented in the package comment:
// "%25" → '%', "%7B" → '{', "%7D" → '}', and "%00" alone → the empty key.
// ok is false when s is not something the escaping can produce.
func unescape(s string) (key string, ok bool) {
	if s == "%00" {
		return "", true
	}
	if s == "" {
		return "", false
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '{', '}':
			return "", false
		case '%':
			if i+2 >= len(s) {
				return "", false
			}
			switch s[i+1 : i+3] {
			case "25":
				b.WriteByte('%')
			case "7B":
				b.WriteByte('{')
			case "7D":
				b.WriteByte('}')
			default:
				return "", false
			}
			i += 2
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), true
}

// FuzzRedisKeys checks the key escaping on any pair of client keys: every
// Redis key a decision touches carries exactly one hash tag, that tag is the
// client key (escaped, and decoding back to it), all keys of one client key
// live in one Cluster slot whatever the algorithm, and two different client
// keys never share a Redis key.
func FuzzRedisKeys(f *testing.F) {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never contacted: Keys is pure
	f.Cleanup(func() { _ = client.Close() })
	var stores []*redisstore.Store
	for _, prefix := range []string{"", "app:v2", "%7B"} {
		s, err := redisstore.New(client, redisstore.Config{Prefix: prefix})
		if err != nil {
			f.Fatalf("New(prefix %q): %v", prefix, err)
		}
		stores = append(stores, s)
	}
	for _, seed := range [][2]string{
		{"user:42", "user:43"},
		{"{a}", "%7Ba%7D"},
		{"", "%00"},
		{"%", "%25"},
		{"a}:gcra:x", "a"},
		{"}{", "{}"},
		{"ключ{}", "ключ%7B%7D"},
		{"\xff\x00{", "\xff\x00%7B"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		type owner struct {
			key string
			alg limiter.Algorithm
		}
		for _, s := range stores {
			owners := map[string]owner{} // Redis key → the decision that touches it
			for _, key := range []string{a, b} {
				slot := -1
				for _, alg := range limiter.AllAlgorithms() {
					for _, rk := range s.Keys(key, alg) {
						if n, m := strings.Count(rk, "{"), strings.Count(rk, "}"); n != 1 || m != 1 {
							t.Fatalf("client key %q (%s): Redis key %q has %d '{' and %d '}', want exactly one hash tag", key, alg, rk, n, m)
						}
						tag, ok := hashTag(rk)
						if !ok {
							t.Fatalf("client key %q (%s): Redis key %q has no hash tag Redis Cluster would use", key, alg, rk)
						}
						if back, ok := unescape(tag); !ok || back != key {
							t.Fatalf("client key %q (%s): hash tag %q of %q decodes to %q (ok %v), want the client key", key, alg, tag, rk, back, ok)
						}
						if got := redisstore.KeySlot(rk); slot == -1 {
							slot = got
						} else if got != slot {
							t.Fatalf("client key %q: Redis key %q is in slot %d, another of its keys in slot %d", key, rk, got, slot)
						}
						if prev, dup := owners[rk]; dup && prev != (owner{key, alg}) {
							t.Fatalf("Redis key %q serves both client key %q (%s) and client key %q (%s)", rk, prev.key, prev.alg, key, alg)
						}
						owners[rk] = owner{key, alg}
					}
				}
			}
		}
	})
}
