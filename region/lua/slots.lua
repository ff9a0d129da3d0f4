-- Shared by every multi-region decision script, after the decision
-- scripts' preamble (floordiv, ceildiv). A key's state is one hash:
--   r:<slot>  a slot, "a:b[:c]" integers: the state one writer (a region,
--             or strict@<home> for the strict decisions of hybrid made on
--             the home region's Redis) keeps for itself. Only its writer
--             changes it; the other regions' copies are merged with
--             max() (merge.lua), so slots are shipped, never computed.
--   l:<name>  local state that is never shipped (the buckets'
--             reconstruction, see token_bucket.lua).
-- Integers are written with %.0f: tostring would write 1.7e+15.
local function int(x)
  return string.format('%.0f', x)
end
local function parse(v)
  local t = {}
  for part in string.gmatch(v, '[^:]+') do t[#t + 1] = tonumber(part) or 0 end
  return t
end
-- read returns the key's slots (name -> integers) and local fields
-- (name -> string).
local function read(key)
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
-- save_bucket writes a bucket's state: its own local fields, the slots it
-- learnt from other regions, and, when units were taken, this region's
-- slot (shipped as r:<me>, remembered as l:s:<me>); the key expires after
-- ttl ms. It returns the new slot ('' when nothing was taken).
local function save_bucket(key, fields, learnt, slots, me, mine, taken, ttl)
  for _, name in ipairs(learnt) do
    local s = slots[name]
    fields[#fields + 1] = 'l:s:' .. name
    fields[#fields + 1] = int(s[1]) .. ':' .. int(s[2] or 0)
  end
  local slot = ''
  if taken > 0 then
    slot = int(mine[1]) .. ':' .. int((mine[2] or 0) + taken)
    fields[#fields + 1] = 'r:' .. me
    fields[#fields + 1] = slot
    fields[#fields + 1] = 'l:s:' .. me
    fields[#fields + 1] = slot
  end
  redis.call('HSET', key, unpack(fields))
  redis.call('PEXPIRE', key, ttl)
  return slot
end
