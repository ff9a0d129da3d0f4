-- token_bucket across regions: the body of decide(KEYS, ARGV, now, cost,
-- peek).
--
-- What replicates is consumed units: each slot is "e:n", n units its writer
-- took since its epoch e (µs, its Redis clock when its state of the key
-- started). A bucket cannot be a sum of counters (refill stops at full), so
-- each region reconstructs the global bucket in l: fields it never ships:
--   l:lvl, l:t   the level (units of 1/period token; below 0 is a debt) at t
--   l:s:<slot>   "e:n", how much of each slot is already in the level
-- A decision refills the level to now, then takes out every slot's units not
-- yet seen (n − seen, or n for a new epoch) as if taken now, then decides as
-- the single-region script does. Units learnt late are taken later than they
-- were spent, so the bucket refills later: the reconstruction errs on the
-- strict side, except for the units not yet shipped (see OvershootBound).
-- The level is floored at −burst: a debt of more than a bucket can only come
-- from a slot counted twice (a peer's epoch seen again after this region's
-- state expired).
-- The state expires keep ms after the bucket is full again (keep is one
-- bucket's refill time), so that a peer's slot shipped late still finds the
-- mark of what was seen and is not counted twice.
-- KEYS[1]  the key's hash (see slots.lua)
-- ARGV     slot, threshold (units; -1 = none), keep (ms), burst, rate, period (µs), cost, mode
-- returns  as fixed_window.lua; strict for = until the bucket is full again
local me, threshold, keep = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local burst, rate, period = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local full = burst * period

local slots, locals = read(KEYS[1])
local level = full
local stored, at = tonumber(locals['lvl']), tonumber(locals['t'])
if stored and at then
  level = stored
  if level < full then
    -- Clamp the elapsed time so that elapsed·rate stays within 2^53.
    local elapsed = math.min(math.max(now - at, 0), ceildiv(full - level, rate))
    level = math.min(full, level + elapsed * rate)
  end
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
    level = level - delta * period
    learnt[#learnt + 1] = name
  end
end
level = math.max(level, -full)

local mine = slots[me] or {now, 0}
local function save(taken)
  return save_bucket(KEYS[1], {'l:lvl', int(level), 'l:t', int(now)}, learnt, slots, me, mine, taken,
    math.ceil(ceildiv(full - level, rate) / 1000) + keep)
end

local refill = ceildiv(full - level, rate)
if threshold >= 0 and (full - level) + cost * period > threshold * period then
  if not peek and #learnt > 0 then save(0) end
  return {0, math.max(floordiv(level, period), 0), refill, 0, 0, 1, refill, ''}
end
if level >= cost * period then
  if peek then
    return {cost, floordiv(level, period), refill, 0, 0, 0, refill, ''}
  end
  level = level - cost * period
  local slot = save(cost)
  refill = ceildiv(full - level, rate)
  return {cost, floordiv(level, period), refill, 0, 0, 0, refill, slot}
end
if not peek and #learnt > 0 then save(0) end
return {0, math.max(floordiv(level, period), 0), refill, ceildiv(cost * period - level, rate), 0, 0, refill, ''}
