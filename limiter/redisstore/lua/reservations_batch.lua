-- The main part of a batch of reservation calls on one algorithm, after
-- lua/reservations.lua: each call's keys in turn in KEYS (nk + 2 each);
-- ARGV = n, then per call: kind (0 reserve, 1 settle), its number of
-- arguments, its arguments. Returns five integers a call, in order.
local out, k, a = {}, 0, 2
for _ = 1, tonumber(ARGV[1]) do
  local kind, na = tonumber(ARGV[a]), tonumber(ARGV[a + 1])
  local keys, argv = {}, {}
  for j = 1, na do argv[j] = ARGV[a + 1 + j] end
  for j = 1, nk + 2 do keys[j] = KEYS[k + j] end
  a, k = a + 2 + na, k + nk + 2
  local r
  if kind == 0 then r = reserve(keys, argv) else r = settle(keys, argv) end
  for j = 1, 5 do out[#out + 1] = r[j] or 0 end
end
return out
