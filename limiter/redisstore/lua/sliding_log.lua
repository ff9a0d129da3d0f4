-- sliding_log: the body of decide_values(KEYS, ARGV, now, cost, peek), one
-- decision made atomically at now (µs, Redis's clock); with peek it writes
-- nothing (expired entries stay until the next decision drops them) and
-- answers with the state as it is.
-- KEYS[1]  sorted set: one member per admitted unit, score = admission time (µs)
-- KEYS[2]  counter that makes members unique, even within one microsecond
-- ARGV     rate, period (µs), cost, mode
-- returns  units admitted (the cost; 0 = rejected), remaining, reset after (µs), retry after (µs), delay (µs)
local rate = tonumber(ARGV[1])
local period = tonumber(ARGV[2])

-- Entries at or before cutoff have left the window. The bound is written
-- with %d: concatenating a number would round it to 14 digits.
local cutoff = now - period
local inside = string.format('(%d', cutoff)
if not peek then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', cutoff)
end
local n = redis.call('ZCOUNT', KEYS[1], inside, '+inf')
local allowed = n + cost <= rate

if allowed and not peek then
  append_log(KEYS, now, cost)
  -- The newest entry is now: after one period the log is empty.
  local ttl = math.ceil(period / 1000)
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('PEXPIRE', KEYS[2], ttl)
  return cost, math.max(rate - n - cost, 0), period, 0, 0
end

local reset = 0
local newest = redis.call('ZREVRANGEBYSCORE', KEYS[1], '+inf', inside, 'WITHSCORES', 'LIMIT', 0, 1)
if newest[2] then
  reset = tonumber(newest[2]) + period - now
end
if allowed then
  return cost, rate - n, reset, 0, 0
end
-- Rejected: wait until the (n + cost − rate)-th oldest unit leaves the window.
local nth = redis.call('ZRANGEBYSCORE', KEYS[1], inside, '+inf', 'WITHSCORES', 'LIMIT', n + cost - rate - 1, 1)
local retry = tonumber(nth[2]) + period - now
return 0, math.max(rate - n, 0), reset, retry, 0
