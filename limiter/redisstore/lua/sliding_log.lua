-- sliding_log's arithmetic for Redis, in the two sections the generator
-- (scripts_gen_test.go, go generate ./limiter/redisstore/) takes apart,
-- each after its "--- name" line: decide, the body of decide_values, in
-- every decision script (region's too); settle, mark and adjust, in the
-- reservation scripts. The memory store's is limiter/sliding_log.go.
--- decide
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
--- settle
-- sliding_log: mark and adjust for reservations. mark is the admission's
-- time: a refund removes up to −delta members of that score while it is
-- inside the window; an excess adds delta members at now, the log holding
-- at most two quotas.
local function mark(ARGV, now)
  return now
end
local function adjust(KEYS, ARGV, now, delta, charged)
  local rate, period = tonumber(ARGV[1]), tonumber(ARGV[2])
  if delta < 0 then
    if charged > now - period then
      local members = redis.call('ZRANGEBYSCORE', KEYS[1], charged, charged, 'LIMIT', 0, -delta)
      for i = 1, #members, 1000 do
        redis.call('ZREM', KEYS[1], unpack(members, i, math.min(i + 999, #members)))
      end
    end
    return
  end
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - period)
  local add = math.min(delta, 2 * rate - redis.call('ZCARD', KEYS[1]))
  if add <= 0 then return end
  append_log(KEYS, now, add)
  local ttl = math.ceil(period / 1000)
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('PEXPIRE', KEYS[2], ttl)
end
