-- gcra: the body of decide(KEYS, ARGV, now, cost, peek), one decision made
-- atomically at now (µs, Redis's clock); with peek it writes nothing and
-- answers with the state as it is.
-- KEYS[1]  string: the theoretical arrival time TAT (µs, a float); missing = now
-- ARGV     burst, rate, period (µs), cost, mode
-- returns  {units admitted (the cost; 0 = rejected), remaining, reset after (µs), retry after (µs), delay (µs)}
--
-- Works relative to now (ahead = TAT − now) so that every later step
-- handles small numbers; epsilon absorbs float rounding where a quantity
-- counted in emission intervals should be a whole number.
local burst = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local period = tonumber(ARGV[3])
local epsilon = 1e-9

local interval = period / rate
local tolerance = burst * interval
local ahead = 0
local tat = tonumber(redis.call('GET', KEYS[1]))
if tat then
  ahead = math.max(tat - now, 0)
end
local newAhead = ahead + cost * interval

local wait = newAhead - tolerance
if wait / interval > epsilon then
  local remaining = math.max(math.floor((tolerance - ahead) / interval + epsilon), 0)
  return {0, remaining, math.ceil(ahead - epsilon * interval), math.ceil(wait - epsilon * interval), 0}
end
if peek then
  local remaining = math.max(math.floor((tolerance - ahead) / interval + epsilon), 0)
  return {cost, remaining, math.ceil(ahead - epsilon * interval), 0, 0}
end

-- Once TAT has passed the state is that of a fresh key.
redis.call('SET', KEYS[1], now + newAhead, 'PX', math.ceil(newAhead / 1000))
local remaining = math.max(math.floor((tolerance - newAhead) / interval + epsilon), 0)
return {cost, remaining, math.ceil(newAhead - epsilon * interval), 0, 0}
