package region

// homeOf picks key's home among names (sorted) by rendezvous hashing: the
// name with the highest score(name, key), the first in order on a tie. It
// does not allocate.
func homeOf(names []string, key string) string {
	best, bestScore := "", uint64(0)
	for i, n := range names {
		if sc := score(n, key); i == 0 || sc > bestScore {
			best, bestScore = n, sc
		}
	}
	return best
}

// score is a stable 64-bit hash of (region, key): FNV-1a over the region,
// a 0xff separator (a byte no UTF-8 text holds) and the key, then the
// SplitMix64 finaliser, so that scores of one key under different regions
// are independent.
func score(region, key string) uint64 {
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	for i := 0; i < len(region); i++ {
		h = (h ^ uint64(region[i])) * prime
	}
	h = (h ^ 0xff) * prime
	for i := 0; i < len(key); i++ {
		h = (h ^ uint64(key[i])) * prime
	}
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}
