-- sliding_window's arithmetic for Redis, in the two sections the generator
-- (scripts_gen_test.go, go generate ./limiter/redisstore/) takes apart,
-- each after its "--- name" line: decide, the body of decide_values, in
-- every decision script (region's too); settle, mark and adjust, in the
-- reservation scripts. The memory store's is limiter/sliding_window.go.
--- decide
-- sliding_window (counter): the body of decide_values(KEYS, ARGV, now, cost,
-- peek), one decision made atomically at now (µs, Redis's clock); with peek
-- it writes nothing and answers with the state as it is.
-- KEYS[1]  hash {w = current window start (µs), c = units admitted in it,
--                p = units admitted in the window before, x = when the key
--                expires (µs): two periods past w, written with w, so that
--                a decision finding both as its own window's (the period
--                may have changed live) has no expiry to set}; across regions
--          (regions set, see region/lua/slots.lua) the key's slots "w:c:p",
--          one per writer: the current and previous counts are the sums
--          over the slots of this window (c and p) and of the one before (c)
-- ARGV     rate, period (µs), window offset (µs), cost, mode
-- returns  units admitted (the cost; 0 = rejected), remaining, reset after (µs), retry after (µs), delay (µs);
--          across regions then over the hybrid threshold (1/0), strict for (µs: the window's end), the written slot
--
-- The weighted previous count prev·(P−e)/P is compared scaled by P, in
-- integers below 2^53, so the comparison is exact.
local rate = tonumber(ARGV[1])
local period = tonumber(ARGV[2])
local offset = tonumber(ARGV[3])

local ws = now - math.fmod(now - offset, period)
local elapsed = now - ws
local windowEnd = ws + period - now

local cur, prev, mycur, myprev = 0, 0, 0, 0
local kept = false -- the key has this window's expiry (x) already
if regions then
  for name, s in pairs(regions.read(KEYS[1])) do
    local c, p = s[2] or 0, s[3] or 0
    if s[1] == ws then
      cur, prev = cur + c, prev + p
      if name == regions.me then mycur, myprev = c, p end
    elseif s[1] == ws - period then
      prev = prev + c
      if name == regions.me then myprev = c end
    end
  end
else
  local state = redis.call('HMGET', KEYS[1], 'w', 'c', 'p', 'x')
  local stored = tonumber(state[1])
  if stored == ws then
    cur = tonumber(state[2]) or 0
    prev = tonumber(state[3]) or 0
    kept = tonumber(state[4]) == ws + 2 * period
  elseif stored == ws - period then
    prev = tonumber(state[2]) or 0
  end
end

local weighted = prev * (period - elapsed) -- weighted previous count × P
if regions and regions.threshold >= 0 and (cur + cost) * period + weighted > regions.threshold * period then
  local remaining = math.max(floordiv(rate * period - cur * period - weighted, period), 0)
  return 0, remaining, windowEnd, 0, 0, 1, windowEnd, ''
end
local allowed = (cur + cost) * period + weighted <= rate * period
local newcur = cur
if allowed and not peek then
  newcur = cur + cost
end
local remaining = math.max(floordiv(rate * period - newcur * period - weighted, period), 0)
local reset = 0
if newcur > 0 then
  reset = ws + 2 * period - now
elseif prev > 0 then
  reset = windowEnd
end

if allowed then
  if peek then
    return cost, remaining, reset, 0, 0, regions and 0, windowEnd, ''
  end
  -- After two windows without traffic the state is that of a fresh key.
  if regions then
    local slot = regions.int(ws) .. ':' .. regions.int(mycur + cost) .. ':' .. regions.int(myprev)
    regions.save_slot(KEYS[1], slot, math.ceil(reset / 1000))
    return cost, remaining, reset, 0, 0, 0, windowEnd, slot
  end
  if kept then
    -- The write that set w and x set this expiry; any other leaves it.
    redis.call('HSET', KEYS[1], 'c', newcur)
  else
    redis.call('HSET', KEYS[1], 'w', ws, 'c', newcur, 'p', prev, 'x', ws + 2 * period)
    redis.call('PEXPIRE', KEYS[1], math.ceil(reset / 1000))
  end
  return cost, remaining, reset, 0, 0
end

local retry
if prev > 0 and cur + cost <= rate then
  -- Later in this window, once prev·(P−e')/P ≤ rate − cur − cost.
  retry = period - floordiv((rate - cur - cost) * period, prev) - elapsed
else
  -- In the next window, where the previous count is cur.
  retry = windowEnd + period - floordiv((rate - cost) * period, math.max(cur, 1))
end
if regions then
  return 0, remaining, reset, math.max(retry, 1), 0, 0, windowEnd, ''
end
return 0, remaining, reset, retry, 0
--- settle
-- sliding_window: mark and adjust for reservations, as fixed_window's. A
-- refund goes into the window charged: this window's count, or, once the
-- state has moved on one window, the previous count it weighs; with no
-- count left in either the key is deleted.
local function mark(ARGV, now)
  return now - math.fmod(now - tonumber(ARGV[3]), tonumber(ARGV[2]))
end
local function adjust(KEYS, ARGV, now, delta, charged)
  local rate, period = tonumber(ARGV[1]), tonumber(ARGV[2])
  local state = redis.call('HMGET', KEYS[1], 'w', 'c', 'p')
  local w, c, p = tonumber(state[1]), tonumber(state[2]) or 0, tonumber(state[3]) or 0
  if delta < 0 then
    if w == charged then
      c = math.max(c + delta, 0)
    elseif w == charged + period then
      p = math.max(p + delta, 0)
    else
      return
    end
    if c == 0 and p == 0 then
      -- None left counted: the state of a fresh key, which a set's
      -- give-back leaves as it found it.
      redis.call('DEL', KEYS[1])
    else
      redis.call('HSET', KEYS[1], 'c', c, 'p', p)
    end
    return
  end
  local ws = mark(ARGV, now)
  if w == ws - period then
    c, p = 0, c
  elseif w ~= ws then
    c, p = 0, 0
  end
  redis.call('HSET', KEYS[1], 'w', ws, 'c', math.min(c + delta, 2 * rate), 'p', p, 'x', ws + 2 * period)
  redis.call('PEXPIRE', KEYS[1], math.ceil((ws + 2 * period - now) / 1000))
end
