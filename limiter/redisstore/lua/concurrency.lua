-- concurrency: concurrency leases per key, one atomic call per operation on
-- Redis's clock. Leases past their expiry are dropped, and counted, first.
-- KEYS[1]  sorted set: lease id → expiry (µs)
-- ARGV     op ("acquire" or "release"), lease id, limit, TTL (µs)
-- returns  acquire: {1 admitted / 0 refused, leases held, expired dropped, µs until the earliest expiry}
--          release: {1 released / 0 not held, leases held, expired dropped, 0}
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
local expired = redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)

if ARGV[1] == 'release' then
  local released = redis.call('ZREM', KEYS[1], ARGV[2])
  return {released, redis.call('ZCARD', KEYS[1]), expired, 0}
end

local limit = tonumber(ARGV[3])
local ttl = tonumber(ARGV[4])
local held = redis.call('ZCARD', KEYS[1])
if held >= limit then
  local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return {0, held, expired, tonumber(first[2]) - now}
end
redis.call('ZADD', KEYS[1], now + ttl, ARGV[2])
-- The set outlives its last lease by one TTL, so that a leak is still
-- counted by the key's next call; then Redis drops it.
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIRE', KEYS[1], math.ceil((tonumber(last[2]) - now + ttl) / 1000))
return {1, held + 1, expired, 0}
