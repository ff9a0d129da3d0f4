-- The main part of a batch of reservation calls on one algorithm, after
-- lua/reservations.lua: each call's keys in turn in KEYS (nk + 1 each);
-- ARGV = n, then per call: kind (0 reserve, 1 settle), its number of
-- arguments, its arguments. Returns five integers a call, in order. The
-- calls run one after another, so one table of keys and one of arguments
-- serve them all.
local out, k, a = {}, 0, 2
local keys, argv = {}, {}
for _ = 1, tonumber(ARGV[1]) do
  local kind, na = tonumber(ARGV[a]), tonumber(ARGV[a + 1])
  for j = 1, na do argv[j] = ARGV[a + 1 + j] end
  for j = 1, nk + 1 do keys[j] = KEYS[k + j] end
  a, k = a + 2 + na, k + nk + 1
  local r
  if kind == 0 then r = reserve(keys, argv) else r = settle(keys, argv) end
  local o = #out
  for j = 1, 5 do out[o + j] = r[j] or 0 end
end
return out
