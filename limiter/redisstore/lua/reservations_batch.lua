-- The main part of a batch of reservation calls on one algorithm, after
-- lua/reservations.lua: each call's keys in turn in KEYS (nk + 1 each);
-- ARGV = n, nsets, per set: its length, the algorithm's parameters and,
-- for reserves and renewals, hold, policy and keep, for settles 0 and the
-- quota (the 0 is the place of each one's actual cost); then per call: kind (0
-- reserve, 1 settle, 2 renew), its set (from 0), its estimate or actual
-- cost (0 for a renewal), its id. A set is
-- the arguments of one call (see lua/reservations.lua) with its cost, mode,
-- id (and a settle's actual) filled in by each call in turn; the calls run
-- one after another, so one table of keys serves them all. Returns five
-- integers a call, in order.
local n, nsets = tonumber(ARGV[1]), tonumber(ARGV[2])
local sets, a = {}, 3
for s = 1, nsets do
  local len, set = tonumber(ARGV[a]), {}
  for j = 1, np do set[j] = ARGV[a + j] end
  for j = np + 1, len do set[j + 3] = ARGV[a + j] end
  sets[s] = set
  a = a + 1 + len
end
local out, keys, k = {}, {}, 0
for i = 1, n do
  local kind, argv = tonumber(ARGV[a]), sets[tonumber(ARGV[a + 1]) + 1]
  for j = 1, nk + 1 do keys[j] = KEYS[k + j] end
  k = k + nk + 1
  argv[np + 2], argv[np + 3] = 0, ARGV[a + 3]
  local r
  if kind == 0 then
    argv[np + 1] = ARGV[a + 2]
    r = reserve(keys, argv)
  elseif kind == 2 then
    argv[np + 1] = 1
    r = renew(keys, argv)
  else
    argv[np + 1], argv[np + 4] = 1, ARGV[a + 2]
    r = settle(keys, argv)
  end
  a = a + 4
  local o = (i - 1) * 5
  for j = 1, 5 do out[o + j] = r[j] or 0 end
end
return out
