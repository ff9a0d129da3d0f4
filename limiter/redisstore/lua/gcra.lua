-- gcra's arithmetic for Redis, in the two sections the generator
-- (scripts_gen_test.go, go generate ./limiter/redisstore/) takes apart,
-- each after its "--- name" line: decide, the body of decide_values, in
-- every decision script (region's too); settle, mark and adjust, in the
-- reservation scripts. The memory store's is limiter/gcra.go.
--- decide
-- gcra: the body of decide_values(KEYS, ARGV, now, cost, peek), one decision made
-- atomically at now (µs, Redis's clock); with peek it writes nothing and
-- answers with the state as it is.
-- KEYS[1]  string: the theoretical arrival time TAT (µs, a float); missing = now.
--          Across regions (regions set, see region/lua/slots.lua) a hash:
--          the TAT is l:tat, never shipped; what the regions ship is their
--          slots of consumed units, each added to the TAT once, when first
--          seen (regions.unseen), as if it arrived now; ahead is capped at
--          two tolerances (more can only be a slot counted twice)
-- ARGV     burst, rate, period (µs), cost, mode
-- returns  units admitted (the cost; 0 = rejected), remaining, reset after (µs), retry after (µs), delay (µs);
--          across regions then over the hybrid threshold (1/0), strict for (µs: until the TAT), the written slot
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
local tat, slots, locals
if regions then
  slots, locals = regions.read(KEYS[1])
  tat = tonumber(locals['tat'])
else
  tat = tonumber(redis.call('GET', KEYS[1]))
end
if tat then
  ahead = math.max(tat - now, 0)
end
local learnt, save
if regions then
  local unseen
  unseen, learnt = regions.unseen(slots, locals)
  ahead = math.min(ahead + unseen * interval, 2 * tolerance)
  -- Once TAT has passed (and keep later) the state is that of a fresh key.
  save = function(taken)
    return regions.save_bucket(KEYS[1], {'l:tat', string.format('%.3f', now + ahead)}, learnt, slots, taken,
      math.ceil(ahead / 1000))
  end
end
local newAhead = ahead + cost * interval

if regions and regions.threshold >= 0 and newAhead / interval - regions.threshold > epsilon then
  if not peek and #learnt > 0 then save(0) end
  local reset = math.max(math.ceil(ahead - epsilon * interval), 0)
  return 0, math.max(math.floor((tolerance - ahead) / interval + epsilon), 0), reset, 0, 0, 1, reset, ''
end
local wait = newAhead - tolerance
if wait / interval > epsilon then
  if regions and not peek and #learnt > 0 then save(0) end
  local remaining = math.max(math.floor((tolerance - ahead) / interval + epsilon), 0)
  local reset = math.max(math.ceil(ahead - epsilon * interval), 0)
  return 0, remaining, reset, math.ceil(wait - epsilon * interval), 0, regions and 0, reset, ''
end
if peek then
  local remaining = math.max(math.floor((tolerance - ahead) / interval + epsilon), 0)
  local reset = math.max(math.ceil(ahead - epsilon * interval), 0)
  return cost, remaining, reset, 0, 0, regions and 0, reset, ''
end

local remaining = math.max(math.floor((tolerance - newAhead) / interval + epsilon), 0)
local reset = math.ceil(newAhead - epsilon * interval)
if regions then
  ahead = newAhead
  return cost, remaining, reset, 0, 0, 0, reset, save(cost)
end
-- Once TAT has passed the state is that of a fresh key.
redis.call('SET', KEYS[1], now + newAhead, 'PX', math.ceil(newAhead / 1000))
return cost, remaining, reset, 0, 0
--- settle
-- gcra: mark and adjust for reservations. The TAT moves by delta emission
-- intervals: back to now at most on a refund, ahead of now by two
-- tolerances at most on an excess.
local function mark(ARGV, now)
  return 0
end
local function adjust(KEYS, ARGV, now, delta, charged)
  local burst, rate, period = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
  local interval = period / rate
  local tat = tonumber(redis.call('GET', KEYS[1]))
  local ahead = 0
  if tat then ahead = math.max(tat - now, 0) end
  ahead = math.min(math.max(ahead + delta * interval, 0), 2 * burst * interval)
  local ms = math.ceil(ahead / 1000)
  if ms <= 0 then
    redis.call('DEL', KEYS[1])
    return
  end
  redis.call('SET', KEYS[1], now + ahead, 'PX', ms)
end
