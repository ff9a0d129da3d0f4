-- The multi-region mode of the decision scripts, after their preamble: it
-- sets regions, which each algorithm's script (limiter/redisstore/lua)
-- reads and writes its state through instead of the single-region keys.
-- A key's state is one hash:
--   r:<slot>  a slot, "a:b[:c]" integers: the state one writer (a region,
--             or strict@<home> for the strict decisions of hybrid made on
--             the home region's Redis) keeps for itself. Only its writer
--             changes it; the other regions' copies are merged with
--             max() (merge.lua), so slots are shipped, never computed.
--   l:<name>  local state that is never shipped (the buckets'
--             reconstruction: l:s:<slot>, how much of each slot is counted).
-- me, threshold (units; -1 = none), keep (ms) and now are set by run.lua.
-- Integers are written with %.0f: tostring would write 1.7e+15.
regions = {}
function regions.int(x)
  return string.format('%.0f', x)
end
local function parse(v)
  local t = {}
  for part in string.gmatch(v, '[^:]+') do t[#t + 1] = tonumber(part) or 0 end
  return t
end
-- read returns the key's slots (name -> integers) and local fields
-- (name -> string).
function regions.read(key)
  local all = redis.call('HGETALL', key)
  local slots, locals = {}, {}
  for i = 1, #all, 2 do
    local f, v = all[i], all[i + 1]
    local kind, name = string.sub(f, 1, 2), string.sub(f, 3)
    if kind == 'r:' then
      slots[name] = parse(v)
    elseif kind == 'l:' then
      locals[name] = v
    end
  end
  return slots, locals
end
-- unseen returns the units of the buckets' slots ("e:n": n units taken
-- since epoch e) not yet counted in the local state (n − seen, or n for a
-- new epoch), and the names of the slots they are in.
function regions.unseen(slots, locals)
  local units, learnt = 0, {}
  for name, s in pairs(slots) do
    local e, n = s[1], s[2] or 0
    local delta = n
    local seen = locals['s:' .. name]
    if seen then
      local t = parse(seen)
      if t[1] == e then delta = n - (t[2] or 0) elseif t[1] > e then delta = 0 end
    end
    if delta > 0 then
      units = units + delta
      learnt[#learnt + 1] = name
    end
  end
  return units, learnt
end
-- save_slot writes this region's slot of a window; the key expires
-- ttl + keep ms later.
function regions.save_slot(key, slot, ttl)
  redis.call('HSET', key, 'r:' .. regions.me, slot)
  redis.call('PEXPIRE', key, ttl + regions.keep)
end
-- save_bucket writes a bucket's state: its own local fields, the slots it
-- learnt, and, when units were taken, this region's slot (shipped as
-- r:<me>, remembered as l:s:<me>); the key expires ttl + keep ms later.
-- keep (one refill time) is how long a peer's slot shipped late still
-- finds the mark of what was seen, and is not counted twice. It returns
-- the new slot ('' when nothing was taken).
function regions.save_bucket(key, fields, learnt, slots, taken, ttl)
  local int, me = regions.int, regions.me
  for _, name in ipairs(learnt) do
    local s = slots[name]
    fields[#fields + 1] = 'l:s:' .. name
    fields[#fields + 1] = int(s[1]) .. ':' .. int(s[2] or 0)
  end
  local slot = ''
  if taken > 0 then
    local mine = slots[me] or {regions.now, 0}
    slot = int(mine[1]) .. ':' .. int((mine[2] or 0) + taken)
    fields[#fields + 1] = 'r:' .. me
    fields[#fields + 1] = slot
    fields[#fields + 1] = 'l:s:' .. me
    fields[#fields + 1] = slot
  end
  redis.call('HSET', key, unpack(fields))
  redis.call('PEXPIRE', key, ttl + regions.keep)
  return slot
end
