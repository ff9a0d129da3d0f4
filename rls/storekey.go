package rls

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"

	"github.com/rl-exporter/rl-exporter/decision"
)

// keyPrefix starts every store key of the service, apart from HTTP's.
const keyPrefix = "rls|"

// storeKey is a descriptor's limiter key: its domain and entries, each part escaped so that
// distinct descriptors never share a key, then suffix. One over decision.MaxKey bytes before the
// suffix (the values are the client's: a header, a path) becomes "=sha256:" and its hash (no
// escaped domain holds a bare '='), so that huge values neither make huge store keys nor escape
// the limit by making the request invalid.
func storeKey(domain string, entries []*ratelimitv3.RateLimitDescriptor_Entry, suffix string) string {
	size := len(keyPrefix) + escapedLen(domain)
	for _, e := range entries {
		size += 2 + escapedLen(e.GetKey()) + escapedLen(e.GetValue())
	}
	if size > decision.MaxKey {
		return hashedKey(domain, entries, size) + suffix
	}
	var b strings.Builder
	b.Grow(size + len(suffix))
	writeKey(&b, domain, entries)
	b.WriteString(suffix)
	return b.String()
}

// hashedKey is storeKey's form of a key of size bytes over decision.MaxKey.
func hashedKey(domain string, entries []*ratelimitv3.RateLimitDescriptor_Entry, size int) string {
	var b strings.Builder
	b.Grow(size)
	writeKey(&b, domain, entries)
	sum := sha256.Sum256([]byte(b.String()))
	return keyPrefix + "=sha256:" + hex.EncodeToString(sum[:16])
}

// writeKey writes the escaped key of domain and entries to b.
func writeKey(b *strings.Builder, domain string, entries []*ratelimitv3.RateLimitDescriptor_Entry) {
	b.WriteString(keyPrefix)
	writeKeyPart(b, domain)
	for _, e := range entries {
		b.WriteByte('|')
		writeKeyPart(b, e.GetKey())
		b.WriteByte('=')
		writeKeyPart(b, e.GetValue())
	}
}

// escapes reports the bytes a key part escapes as %XX.
func escapes(c byte) bool { return c == '|' || c == '=' || c == '%' }

// escapedLen is the length of s escaped by writeKeyPart.
func escapedLen(s string) int {
	n := len(s)
	for i := 0; i < len(s); i++ {
		if escapes(s[i]) {
			n += 2
		}
	}
	return n
}

// writeKeyPart writes s to b with the bytes escapes reports as %XX.
func writeKeyPart(b *strings.Builder, s string) {
	const hexDigits = "0123456789ABCDEF"
	if escapedLen(s) == len(s) {
		b.WriteString(s)
		return
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !escapes(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&0xf])
	}
}
