-- fixed_window: the body of decide(KEYS, ARGV, now, cost, peek), one
-- decision made atomically at now (µs, Redis's clock); with peek it writes
-- nothing and answers with the state as it is.
-- KEYS[1]  hash {w = window start (µs), n = units admitted in that window}
-- ARGV     rate, period (µs), window offset (µs), cost, mode
-- returns  {units admitted (the cost; 0 = rejected), remaining, reset after (µs), retry after (µs), delay (µs)}
local rate = tonumber(ARGV[1])
local period = tonumber(ARGV[2])
local offset = tonumber(ARGV[3])

-- fmod is exact; (now - offset) / period in floating point need not be.
local ws = now - math.fmod(now - offset, period)
local reset = ws + period - now

local state = redis.call('HMGET', KEYS[1], 'w', 'n')
local count = 0
if tonumber(state[1]) == ws then
  count = tonumber(state[2]) or 0
end

if count + cost > rate then
  return {0, math.max(rate - count, 0), reset, reset, 0}
end
if peek then
  return {cost, rate - count, reset, 0, 0}
end
count = count + cost
redis.call('HSET', KEYS[1], 'w', ws, 'n', count)
-- Once the window has passed the state is that of a fresh key.
redis.call('PEXPIRE', KEYS[1], math.ceil(reset / 1000))
return {cost, rate - count, reset, 0, 0}
