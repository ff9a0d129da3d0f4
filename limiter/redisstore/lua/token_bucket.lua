-- token_bucket: the body of decide(KEYS, ARGV, now, cost, peek), one
-- decision made atomically at now (µs, Redis's clock); with peek it writes
-- nothing and answers with the state as it is.
-- KEYS[1]  hash {l = tokens in units of 1/period token (0..burst·period),
--                t = time of l (µs)}; a missing key is a full bucket
-- ARGV     burst, rate, period (µs), cost, mode
-- returns  {units admitted (the cost; 0 = rejected), remaining, reset after (µs), retry after (µs), delay (µs)}
local burst = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local period = tonumber(ARGV[3])
local full = burst * period

local level = full
local state = redis.call('HMGET', KEYS[1], 'l', 't')
local stored, at = tonumber(state[1]), tonumber(state[2])
if stored and at then
  -- Clamp the elapsed time so that elapsed·rate stays within 2^53.
  local elapsed = math.min(math.max(now - at, 0), ceildiv(full, rate))
  level = math.min(full, stored + elapsed * rate)
end

if level >= cost * period then
  if peek then
    return {cost, floordiv(level, period), ceildiv(full - level, rate), 0, 0}
  end
  level = level - cost * period
  local refill = ceildiv(full - level, rate)
  redis.call('HSET', KEYS[1], 'l', level, 't', now)
  -- Once full again the state is that of a fresh key.
  redis.call('PEXPIRE', KEYS[1], math.ceil(refill / 1000))
  return {cost, floordiv(level, period), refill, 0, 0}
end
return {0, floordiv(level, period), ceildiv(full - level, rate), ceildiv(cost * period - level, rate), 0}
