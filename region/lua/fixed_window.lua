-- fixed_window across regions: the body of decide(KEYS, ARGV, now, cost,
-- peek). Each slot is "w:n": n units admitted by its writer in the window
-- starting at w (µs, the writer's Redis clock). The global count of the
-- window starting at ws (this Redis's clock) is the sum of the slots whose
-- w is ws; a slot of an older window counts nothing.
-- KEYS[1]  the key's hash (see slots.lua)
-- ARGV     slot, threshold (units; -1 = none), keep (ms), rate, period (µs), window offset (µs), cost, mode
-- returns  {admitted, remaining, reset after (µs), retry after (µs), delay (µs),
--           over (1: the threshold, not the limit, refused: decide strictly),
--           strict for (µs: until the window's end), the written slot ("" when none)}
local me, threshold, keep = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local rate, period, offset = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])

local ws = now - math.fmod(now - offset, period)
local reset = ws + period - now

local slots = read(KEYS[1])
local count, mine = 0, 0
for name, s in pairs(slots) do
  if s[1] == ws then
    count = count + (s[2] or 0)
    if name == me then mine = s[2] or 0 end
  end
end

if threshold >= 0 and count + cost > threshold then
  return {0, math.max(rate - count, 0), reset, 0, 0, 1, reset, ''}
end
if count + cost > rate then
  return {0, math.max(rate - count, 0), reset, reset, 0, 0, reset, ''}
end
if peek then
  return {cost, rate - count, reset, 0, 0, 0, reset, ''}
end
local slot = int(ws) .. ':' .. int(mine + cost)
redis.call('HSET', KEYS[1], 'r:' .. me, slot)
-- Once the window has passed the state is that of a fresh key.
redis.call('PEXPIRE', KEYS[1], math.ceil(reset / 1000) + keep)
return {cost, rate - count - cost, reset, 0, 0, 0, reset, slot}
