package limiter

import "time"

// WindowOffset is where key's windows start within a Period: a stable hash
// of the key (64-bit FNV-1a) modulo the period, in whole microseconds. Both
// stores use it, so fixed_window and sliding_window keys are staggered the
// same way on memory and on Redis; with Limit.AlignWindows it is not used.
// It does not allocate.
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
