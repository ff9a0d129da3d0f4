package redisstore

// Batched returns how many decisions s has sent to Redis together with
// others, in one script call or one pipeline; 0 without batching.
func Batched(s *Store) int64 {
	if s.batch == nil {
		return 0
	}
	return s.batch.batched.Load()
}

// KeySlot is keySlot, for the Cluster tests.
var KeySlot = keySlot

// StaleMapError is staleMapError, for its table test.
var StaleMapError = staleMapError
