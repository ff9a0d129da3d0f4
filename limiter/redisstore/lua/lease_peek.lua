-- Reads a key's concurrency leases (KEYS[1], the sorted set of lua/concurrency.lua: lease id →
-- expiry in µs) on Redis's clock: the count of those not past their expiry, then the µs each of
-- the earliest ARGV[1] has left. It only reads, so that a usage read changes nothing; the expired
-- ones are left for the next acquire or release to drop and count.
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
-- '(' excludes now itself, as a lease whose expiry is now is expired; %.0f keeps every digit
-- of a µs timestamp, which Lua's default number format would round.
local after = string.format('(%.0f', now)
local out = {redis.call('ZCOUNT', KEYS[1], after, '+inf')}
local first = redis.call('ZRANGEBYSCORE', KEYS[1], after, '+inf', 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[1]))
for i = 2, #first, 2 do
  out[#out + 1] = tonumber(first[i]) - now
end
return out
