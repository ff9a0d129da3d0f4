package limiter

import "time"

// WindowOffset is where key's windows start within period: FNV-1a of the
// key modulo the period, in whole µs, the same for every store. It does
// not allocate.
func WindowOffset(key string, period time.Duration) time.Duration {
	const (
		offset64 = 14695981039346656037
		prime64  = 1099511628211
	)
	h := uint64(offset64)
	for i := 0; i < len(key); i++ {
		h ^= uint64(key[i])
		h *= prime64
	}
	us := uint64(period / time.Microsecond)
	if us == 0 {
		return 0
	}
	return time.Duration(h%us) * time.Microsecond
}
