-- leaky_bucket's arithmetic for Redis, in the two sections the generator
-- (scripts_gen_test.go, go generate ./limiter/redisstore/) takes apart,
-- each after its "--- name" line: decide, the body of decide_values, in
-- every decision script (region's too); settle, mark and adjust, in the
-- reservation scripts. The memory store's is limiter/leaky_bucket.go.
--- decide
-- leaky_bucket (a queue, like NGINX limit_req with a burst): the body of
-- decide_values(KEYS, ARGV, now, cost, peek), one decision made atomically at now
-- (µs, Redis's clock); with peek it writes nothing and answers with the
-- state as it is.
-- KEYS[1]  hash {l = queued work in units of 1/period request (0..burst·period),
--                t = time of l (µs)}; a missing key is an empty bucket
-- ARGV     burst, rate, period (µs), nodelay (0/1), cost, mode
-- returns  units admitted (the cost; 0 = rejected), remaining, reset after (µs), retry after (µs), delay (µs)
local burst = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local period = tonumber(ARGV[3])
local nodelay = tonumber(ARGV[4])
local full = burst * period

local level = 0
local state = redis.call('HMGET', KEYS[1], 'l', 't')
local stored, at = tonumber(state[1]), tonumber(state[2])
if stored and at then
  -- Clamp the elapsed time so that elapsed·rate stays within 2^53 (a
  -- settled excess may queue up to two buckets).
  local elapsed = math.min(math.max(now - at, 0), ceildiv(math.max(stored, full), rate))
  level = math.max(0, stored - elapsed * rate)
end

if level + cost * period <= full then
  local delay = 0
  if nodelay == 0 then
    -- The queue ahead drains first.
    delay = ceildiv(level, rate)
  end
  if peek then
    return cost, floordiv(full - level, period), ceildiv(level, rate), 0, delay
  end
  level = level + cost * period
  local drain = ceildiv(level, rate)
  redis.call('HSET', KEYS[1], 'l', level, 't', now)
  -- Once drained the state is that of a fresh key.
  redis.call('PEXPIRE', KEYS[1], math.ceil(drain / 1000))
  return cost, floordiv(full - level, period), drain, 0, delay
end
return 0, math.max(floordiv(full - level, period), 0), ceildiv(level, rate), ceildiv(level + cost * period - full, rate), 0
--- settle
-- leaky_bucket: mark and adjust for reservations (lua/reservations.lua),
-- on decide's state KEYS[1] {l, t}. The work queued (0 on a fresh key) is
-- brought to now, moved by delta (a refund takes work out down to empty,
-- an excess queues up to two buckets), and the state dropped once it is
-- that of a fresh key. A missing key is empty: a refund does nothing. No
-- mark: a bucket has no window to find.
local function mark(ARGV, now)
  return 0
end
local function adjust(KEYS, ARGV, now, delta, charged)
  local burst, rate, period = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
  local full = burst * period
  local state = redis.call('HMGET', KEYS[1], 'l', 't')
  local level, at = tonumber(state[1]), tonumber(state[2])
  local spent = 0
  if not (level and at) then
    if delta < 0 then return end
  else
    spent = level
    local elapsed = math.min(math.max(now - at, 0), ceildiv(spent, rate))
    spent = math.max(0, spent - elapsed * rate)
  end
  spent = math.min(math.max(spent + delta * period, 0), 2 * full)
  if spent <= 0 then
    redis.call('DEL', KEYS[1])
    return
  end
  redis.call('HSET', KEYS[1], 'l', spent, 't', now)
  redis.call('PEXPIRE', KEYS[1], math.ceil(ceildiv(spent, rate) / 1000))
end
