-- token_bucket's arithmetic for Redis, in the two sections the generator
-- (scripts_gen_test.go, go generate ./limiter/redisstore/) takes apart,
-- each after its "--- name" line: decide, the body of decide_values, in
-- every decision script (region's too); settle, mark and adjust, in the
-- reservation scripts. The memory store's is limiter/token_bucket.go.
--- decide
-- token_bucket: the body of decide_values(KEYS, ARGV, now, cost, peek), one
-- decision made atomically at now (µs, Redis's clock); with peek it writes
-- nothing and answers with the state as it is.
-- KEYS[1]  hash {l = tokens in units of 1/period token (0..burst·period),
--                t = time of l (µs)}; a missing key is a full bucket.
--          Across regions (regions set, see region/lua/slots.lua) the level
--          is l:lvl at l:t, never shipped; what the regions ship is their
--          slots of consumed units, each taken out of the level once, when
--          first seen (regions.unseen), so the level may fall below 0, a
--          debt, floored at −burst (more can only be a slot counted twice)
-- ARGV     burst, rate, period (µs), cost, mode
-- returns  units admitted (the cost; 0 = rejected), remaining, reset after (µs), retry after (µs), delay (µs);
--          across regions then over the hybrid threshold (1/0), strict for (µs: until full again), the written slot
local burst = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local period = tonumber(ARGV[3])
local full = burst * period

local level = full
local stored, at, slots, locals
if regions then
  slots, locals = regions.read(KEYS[1])
  stored, at = tonumber(locals['lvl']), tonumber(locals['t'])
else
  local state = redis.call('HMGET', KEYS[1], 'l', 't')
  stored, at = tonumber(state[1]), tonumber(state[2])
end
if stored and at then
  level = stored
  if level < full then
    -- Clamp the elapsed time so that elapsed·rate stays within 2^53.
    local elapsed = math.min(math.max(now - at, 0), ceildiv(full - level, rate))
    level = math.min(full, level + elapsed * rate)
  end
end

local learnt, save
if regions then
  local unseen
  unseen, learnt = regions.unseen(slots, locals)
  level = math.max(level - unseen * period, -full)
  -- Once full again (and keep later) the state is that of a fresh key.
  save = function(taken)
    return regions.save_bucket(KEYS[1], {'l:lvl', regions.int(level), 'l:t', regions.int(now)}, learnt, slots, taken,
      math.ceil(ceildiv(full - level, rate) / 1000))
  end
  if regions.threshold >= 0 and (full - level) + cost * period > regions.threshold * period then
    if not peek and #learnt > 0 then save(0) end
    local refill = ceildiv(full - level, rate)
    return 0, math.max(floordiv(level, period), 0), refill, 0, 0, 1, refill, ''
  end
end

if level >= cost * period then
  if peek then
    local refill = ceildiv(full - level, rate)
    return cost, floordiv(level, period), refill, 0, 0, regions and 0, refill, ''
  end
  level = level - cost * period
  local refill = ceildiv(full - level, rate)
  if regions then
    return cost, floordiv(level, period), refill, 0, 0, 0, refill, save(cost)
  end
  redis.call('HSET', KEYS[1], 'l', level, 't', now)
  -- Once full again the state is that of a fresh key.
  redis.call('PEXPIRE', KEYS[1], math.ceil(refill / 1000))
  return cost, floordiv(level, period), refill, 0, 0
end
if regions and not peek and #learnt > 0 then save(0) end
local refill = ceildiv(full - level, rate)
return 0, math.max(floordiv(level, period), 0), refill, ceildiv(cost * period - level, rate), 0, regions and 0, refill, ''
--- settle
-- token_bucket: mark and adjust for reservations (lua/reservations.lua),
-- on decide's state KEYS[1] {l, t}. The tokens missing (0 on a fresh key)
-- are brought to now, moved by delta (a refund gives tokens back up to a
-- full bucket, an excess leaves up to one bucket of debt), and the state
-- dropped once it is that of a fresh key. A missing key is full: a refund
-- does nothing. No mark: a bucket has no window to find.
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
    spent = full - level
    local elapsed = math.min(math.max(now - at, 0), ceildiv(spent, rate))
    spent = math.max(0, spent - elapsed * rate)
  end
  spent = math.min(math.max(spent + delta * period, 0), 2 * full)
  if spent <= 0 then
    redis.call('DEL', KEYS[1])
    return
  end
  redis.call('HSET', KEYS[1], 'l', full - spent, 't', now)
  redis.call('PEXPIRE', KEYS[1], math.ceil(ceildiv(spent, rate) / 1000))
end
