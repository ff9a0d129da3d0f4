-- gcra across regions: the body of decide(KEYS, ARGV, now, cost, peek).
-- Slots replicate consumed units as in token_bucket.lua ("e:n"); each
-- region reconstructs the theoretical arrival time in l: fields it never
-- ships:
--   l:tat        the TAT (µs) with every unit seen so far
--   l:s:<slot>   "e:n", how much of each slot is already in l:tat
-- A decision adds every slot's units not yet seen to the TAT as if they
-- arrived now (ahead = max(TAT − now, 0) + unseen × interval), then decides
-- as the single-region script. ahead is capped at two tolerances (a bucket's
-- worth of debt), for the reason given in token_bucket.lua.
-- KEYS[1]  the key's hash (see slots.lua)
-- ARGV     slot, threshold (units; -1 = none), keep (ms), burst, rate, period (µs), cost, mode
-- returns  as fixed_window.lua; strict for = until the TAT has passed
local me, threshold, keep = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local burst, rate, period = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local epsilon = 1e-9
local interval = period / rate
local tolerance = burst * interval

local slots, locals = read(KEYS[1])
local ahead = 0
local tat = tonumber(locals['tat'])
if tat then
  ahead = math.max(tat - now, 0)
end

local learnt = {}
for name, s in pairs(slots) do
  local e, n = s[1], s[2] or 0
  local delta = n
  local seen = locals['s:' .. name]
  if seen then
    local t = parse(seen)
    if t[1] == e then delta = n - (t[2] or 0) elseif t[1] > e then delta = 0 end
  end
  if delta > 0 then
    ahead = ahead + delta * interval
    learnt[#learnt + 1] = name
  end
end
ahead = math.min(ahead, 2 * tolerance)

local mine = slots[me] or {now, 0}
local function save(taken)
  return save_bucket(KEYS[1], {'l:tat', string.format('%.3f', now + ahead)}, learnt, slots, me, mine, taken,
    math.ceil(ahead / 1000) + keep)
end

local newAhead = ahead + cost * interval
local remaining = math.max(math.floor((tolerance - ahead) / interval + epsilon), 0)
local reset = math.ceil(ahead - epsilon * interval)
if threshold >= 0 and newAhead / interval - threshold > epsilon then
  if not peek and #learnt > 0 then save(0) end
  return {0, remaining, reset, 0, 0, 1, reset, ''}
end
local wait = newAhead - tolerance
if wait / interval > epsilon then
  if not peek and #learnt > 0 then save(0) end
  return {0, remaining, reset, math.ceil(wait - epsilon * interval), 0, 0, reset, ''}
end
if peek then
  return {cost, remaining, reset, 0, 0, 0, reset, ''}
end
ahead = newAhead
local slot = save(cost)
remaining = math.max(math.floor((tolerance - ahead) / interval + epsilon), 0)
reset = math.ceil(ahead - epsilon * interval)
return {cost, remaining, reset, 0, 0, 0, reset, slot}
