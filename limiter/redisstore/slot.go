package redisstore

import "strings"

// clusterSlots is the number of hash slots of Redis Cluster.
const clusterSlots = 16384

// crc16Table is CRC-16/XMODEM (polynomial 0x1021), the checksum Redis
// Cluster hashes keys with.
var crc16Table = func() (t [256]uint16) {
	for i := range t {
		c := uint16(i) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return t
}()

// keySlot is the Redis Cluster slot of key, as CLUSTER KEYSLOT gives it.
func keySlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc = crc<<8 ^ crc16Table[byte(crc>>8)^key[i]]
	}
	return int(crc) % clusterSlots
}
