-- token_bucket: one decision, atomically, on Redis's clock.
-- KEYS[1]  hash {l = tokens in units of 1/period token (0..burst·period),
--                t = time of l (µs)}; a missing key is a full bucket
-- ARGV     burst, rate, period (µs), cost
-- returns  {allowed (0/1), remaining, reset after (µs), retry after (µs), delay (µs)}
local burst = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local period = tonumber(ARGV[3])
local cost = tonumber(ARGV[4])

local function floordiv(a, b)
  local r = math.fmod(a, b)
  if r < 0 then r = r + b end
  return (a - r) / b
end
local function ceildiv(a, b) -- a >= 0
  return floordiv(a + b - 1, b)
end

local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
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
  level = level - cost * period
  local refill = ceildiv(full - level, rate)
  redis.call('HSET', KEYS[1], 'l', level, 't', now)
  -- Once full again the state is that of a fresh key.
  redis.call('PEXPIRE', KEYS[1], math.ceil(refill / 1000))
  return {1, floordiv(level, period), refill, 0, 0}
end
return {0, floordiv(level, period), ceildiv(full - level, rate), ceildiv(cost * period - level, rate), 0}
