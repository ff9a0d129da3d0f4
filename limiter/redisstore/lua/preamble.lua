-- Shared by every script, before the algorithm's decide function: integer
-- division helpers, exact on the integer-valued doubles the scripts use.
local function floordiv(a, b)
  local r = math.fmod(a, b)
  if r < 0 then r = r + b end
  return (a - r) / b
end
local function ceildiv(a, b) -- a >= 0
  return floordiv(a + b - 1, b)
end
-- append_log adds n members scored at now to sliding_log's sorted set
-- keys[1], unique by the counter keys[2], in ZADDs of at most 500.
local function append_log(keys, now, n)
  local last = redis.call('INCRBY', keys[2], n)
  local args = {}
  for member = last - n + 1, last do
    args[#args + 1] = now
    args[#args + 1] = member
    if #args >= 1000 then
      redis.call('ZADD', keys[1], unpack(args))
      args = {}
    end
  end
  if #args > 0 then
    redis.call('ZADD', keys[1], unpack(args))
  end
end
-- regions is nil: a key's state is one region's. region/lua/slots.lua sets
-- it for the state replicated as per-region slots (each algorithm's script
-- reads and writes the one or the other).
local regions
