-- sliding_window across regions: the body of decide(KEYS, ARGV, now, cost,
-- peek). Each slot is "w:c:p": its writer's units admitted in the window
-- starting at w (c) and in the window before (p). The global current and
-- previous counts of the window starting at ws are the sums over the slots
-- whose w is ws (c to current, p to previous) or ws − period (c to
-- previous); then the single-region counter: cur + prev·(P−e)/P.
-- KEYS[1]  the key's hash (see slots.lua)
-- ARGV     slot, threshold (units; -1 = none), keep (ms), rate, period (µs), window offset (µs), cost, mode
-- returns  as fixed_window.lua; strict for = until the current window's end
local me, threshold, keep = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local rate, period, offset = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])

local ws = now - math.fmod(now - offset, period)
local elapsed = now - ws
local slots = read(KEYS[1])
local cur, prev, mycur, myprev = 0, 0, 0, 0
for name, s in pairs(slots) do
  local c, p = s[2] or 0, s[3] or 0
  if s[1] == ws then
    cur, prev = cur + c, prev + p
    if name == me then mycur, myprev = c, p end
  elseif s[1] == ws - period then
    prev = prev + c
    if name == me then myprev = c end
  end
end

local weighted = prev * (period - elapsed) -- weighted previous count × P
local windowEnd = ws + period - now
if threshold >= 0 and (cur + cost) * period + weighted > threshold * period then
  local remaining = math.max(floordiv(rate * period - cur * period - weighted, period), 0)
  return {0, remaining, windowEnd, 0, 0, 1, windowEnd, ''}
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
    return {cost, remaining, reset, 0, 0, 0, windowEnd, ''}
  end
  local slot = int(ws) .. ':' .. int(mycur + cost) .. ':' .. int(myprev)
  redis.call('HSET', KEYS[1], 'r:' .. me, slot)
  -- After two windows without traffic the state is that of a fresh key.
  redis.call('PEXPIRE', KEYS[1], math.ceil(reset / 1000) + keep)
  return {cost, remaining, reset, 0, 0, 0, windowEnd, slot}
end

local retry
if prev > 0 and cur + cost <= rate then
  retry = period - floordiv((rate - cur - cost) * period, prev) - elapsed
else
  retry = windowEnd + period - floordiv((rate - cost) * period, math.max(cur, 1))
end
return {0, remaining, reset, math.max(retry, 1), 0, 0, windowEnd, ''}
