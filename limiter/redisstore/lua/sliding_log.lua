-- sliding_log: one decision, atomically, on Redis's clock.
-- KEYS[1]  sorted set: one member per admitted unit, score = admission time (µs)
-- KEYS[2]  counter that makes members unique, even within one microsecond
-- ARGV     rate, period (µs), cost
-- returns  {allowed (0/1), remaining, reset after (µs), retry after (µs), delay (µs)}
local rate = tonumber(ARGV[1])
local period = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])

local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])

redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - period)
local n = redis.call('ZCARD', KEYS[1])

if n + cost <= rate then
  local last = redis.call('INCRBY', KEYS[2], cost)
  local args = {}
  for member = last - cost + 1, last do
    args[#args + 1] = now
    args[#args + 1] = member
    if #args >= 1000 then
      redis.call('ZADD', KEYS[1], unpack(args))
      args = {}
    end
  end
  if #args > 0 then
    redis.call('ZADD', KEYS[1], unpack(args))
  end
  -- The newest entry is now: after one period the log is empty.
  local ttl = math.ceil(period / 1000)
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('PEXPIRE', KEYS[2], ttl)
  return {1, math.max(rate - n - cost, 0), period, 0, 0}
end

-- Rejected: wait until the (n + cost − rate)-th oldest unit leaves the window.
local i = n + cost - rate - 1
local nth = redis.call('ZRANGE', KEYS[1], i, i, 'WITHSCORES')
local newest = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
local retry = tonumber(nth[2]) + period - now
local reset = 0
if newest[2] then
  reset = tonumber(newest[2]) + period - now
end
return {0, math.max(rate - n, 0), reset, retry, 0}
