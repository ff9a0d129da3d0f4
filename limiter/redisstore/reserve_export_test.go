package redisstore

import "github.com/rl-exporter/rl-exporter/limiter"

// ReservationKeys are the keys of key's reservation records under a: its
// book.
func (s *Store) ReservationKeys(key string, a limiter.Algorithm) []string {
	base := s.baseKey(key, a)
	return []string{base + bookSuffix}
}
