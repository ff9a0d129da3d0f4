-- sliding_window (counter): the body of decide(KEYS, ARGV, now, cost,
-- peek), one decision made atomically at now (µs, Redis's clock); with peek
-- it writes nothing and answers with the state as it is.
-- KEYS[1]  hash {w = current window start (µs), c = units admitted in it,
--                p = units admitted in the window before}
-- ARGV     rate, period (µs), window offset (µs), cost, mode
-- returns  {units admitted (the cost; 0 = rejected), remaining, reset after (µs), retry after (µs), delay (µs)}
--
-- The weighted previous count prev·(P−e)/P is compared scaled by P, in
-- integers below 2^53, so the comparison is exact.
local rate = tonumber(ARGV[1])
local period = tonumber(ARGV[2])
local offset = tonumber(ARGV[3])

local ws = now - math.fmod(now - offset, period)

local state = redis.call('HMGET', KEYS[1], 'w', 'c', 'p')
local stored = tonumber(state[1])
local cur, prev = 0, 0
if stored == ws then
  cur = tonumber(state[2]) or 0
  prev = tonumber(state[3]) or 0
elseif stored == ws - period then
  prev = tonumber(state[2]) or 0
end

local elapsed = now - ws
local weighted = prev * (period - elapsed) -- weighted previous count × P
local allowed = (cur + cost) * period + weighted <= rate * period
if allowed and not peek then
  cur = cur + cost
end
local remaining = math.max(floordiv(rate * period - cur * period - weighted, period), 0)
local reset = 0
if cur > 0 then
  reset = ws + 2 * period - now
elseif prev > 0 then
  reset = ws + period - now
end

if allowed then
  if not peek then
    redis.call('HSET', KEYS[1], 'w', ws, 'c', cur, 'p', prev)
    -- After two windows without traffic the state is that of a fresh key.
    redis.call('PEXPIRE', KEYS[1], math.ceil(reset / 1000))
  end
  return {cost, remaining, reset, 0, 0}
end

local retry
if prev > 0 and cur + cost <= rate then
  -- Later in this window, once prev·(P−e')/P ≤ rate − cur − cost.
  retry = period - floordiv((rate - cur - cost) * period, prev) - elapsed
else
  -- In the next window, where the previous count is cur.
  retry = ws + period - now + period - floordiv((rate - cost) * period, cur)
end
return {0, remaining, reset, retry, 0}
