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
