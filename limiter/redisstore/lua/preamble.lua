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
-- regions is nil: a key's state is one region's. region/lua/slots.lua sets
-- it for the state replicated as per-region slots (each algorithm's script
-- reads and writes the one or the other).
local regions
