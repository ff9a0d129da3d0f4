-- merge: a peer's slots into this region's copy of a key's hash, each with
-- max(): a slot "a:b[:c]" replaces the stored one when its first number
-- (window start or epoch) is larger; with the same first number each
-- counter keeps the larger value; an older slot changes nothing. So merging
-- is idempotent and order-free, and a pipeline that failed half-way can be
-- sent again.
-- KEYS[1]  the key's hash
-- ARGV     ttl (ms: the sender's PTTL of the key, 0 = none), then field, value pairs (r:<slot>, "a:b[:c]")
-- returns  1 when a slot changed, else 0
local function parse(v)
  local t = {}
  for part in string.gmatch(v, '[^:]+') do t[#t + 1] = tonumber(part) or 0 end
  return t
end
local changed = false
for i = 2, #ARGV - 1, 2 do
  local f, v = ARGV[i], ARGV[i + 1]
  local cur = redis.call('HGET', KEYS[1], f)
  local new = v
  if cur then
    local a, b = parse(cur), parse(v)
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
  if new then
    redis.call('HSET', KEYS[1], f, new)
    changed = true
  end
end
local ttl = tonumber(ARGV[1])
if changed and ttl > 0 and redis.call('PTTL', KEYS[1]) < ttl then
  redis.call('PEXPIRE', KEYS[1], ttl)
end
if changed then return 1 end
return 0
