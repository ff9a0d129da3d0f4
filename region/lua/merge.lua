-- merge: a peer's slots into this region's copy of a key's hash, each with
-- max(): a slot "a:b[:c]" replaces the stored one when its first number
-- (window start or epoch) is larger; with the same first number each
-- counter keeps the larger value; an older slot changes nothing. So merging
-- is idempotent and order-free, and a pipeline that failed half-way can be
-- sent again.
-- A slot whose first number (µs, its writer's Redis clock) is more than
-- max skew ahead of this Redis's clock is ignored and counted: it would win
-- every max() until that time and hide its writer's real counts. A stored
-- slot that far ahead (merged before) gives way to any incoming one.
-- KEYS[1]  the key's hash
-- ARGV     ttl (ms: the sender's PTTL of the key, 0 = none), max skew (µs),
--          then field, value pairs (r:<slot>, "a:b[:c]")
-- returns  {1 when a slot changed else 0, the number of slots ignored}
local function parse(v)
  local t = {}
  for part in string.gmatch(v, '[^:]+') do t[#t + 1] = tonumber(part) or 0 end
  return t
end
local clock = redis.call('TIME')
local limit = tonumber(clock[1]) * 1000000 + tonumber(clock[2]) + tonumber(ARGV[2])
local changed, rejected = false, 0
for i = 3, #ARGV - 1, 2 do
  local f, v = ARGV[i], ARGV[i + 1]
  local b = parse(v)
  local new = v
  if (b[1] or 0) > limit then
    rejected = rejected + 1
    new = nil
  else
    local cur = redis.call('HGET', KEYS[1], f)
    local a = cur and parse(cur)
    if a and a[1] <= limit then
      if b[1] < a[1] then
        new = nil
      elseif b[1] == a[1] then
        local out, grew = {string.format('%.0f', a[1])}, false
        for j = 2, math.max(#a, #b) do
          local x, y = a[j] or 0, b[j] or 0
          if y > x then grew = true end
          out[j] = string.format('%.0f', math.max(x, y))
        end
        new = grew and table.concat(out, ':') or nil
      end
    end
  end
  if new then
    redis.call('HSET', KEYS[1], f, new)
    changed = true
  end
end
local ttl = tonumber(ARGV[1])
if changed and ttl > 0 and redis.call('PTTL', KEYS[1]) < ttl then
  redis.call('PEXPIRE', KEYS[1], ttl)
end
return {changed and 1 or 0, rejected}
