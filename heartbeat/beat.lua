-- One heartbeat: KEYS[1] is the sorted set of live instances, ARGV[1] this
-- instance's id, ARGV[2] how long (ms) an instance stays live after its last
-- heartbeat. Scores are Redis's own clock in ms, so instances' clocks do not
-- matter. Returns the number of live instances, this one included.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - ttl)
redis.call('PEXPIRE', KEYS[1], ttl * 2)
return redis.call('ZCARD', KEYS[1])
