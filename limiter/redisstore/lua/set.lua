-- set: the parts of one request decided as one (limiter.SetStore), the
-- main part of lua/generated/set.lua, after the preamble, now (µs, Redis's
-- clock) and every algorithm's decide_values, mark and adjust (the
-- sections of lua/<algorithm>.lua) and open (lua/book.lua) in decides,
-- marks, adjusts and opens, by AlgorithmSpec.Index + 1.
-- KEYS     every part's keys, part after part
-- ARGV     mode (0 consume, 1 peek, 3 give back), the number of parts,
--          then per part: its algorithm's index, number of keys and number
--          of parameters, the parameters, the cost, and the mark its take
--          answered (give back; else 0); a reserving set (limiter.SetReserver)
--          then: the reservation's id, the number of parts it holds and,
--          per such part, its index, expiry policy, hold (µs) and keep (ms),
--          their books last in KEYS
-- returns  six integers per part: units admitted (the cost; 0 = refused),
--          remaining, reset after (µs), retry after (µs), delay (µs), and
--          the take's mark (0 unless taken)
-- Consume peeks every part on the state as it is and, only when all admit,
-- takes each one's cost; refused, every part answers as peeked (a part
-- that would admit answers with its cost, having taken nothing). Peek
-- answers so and writes nothing. Give back returns each part's cost, taken
-- at its mark, with the settle arithmetic of reservations (a Cluster's
-- slot group taken before a later group refused), then answers as peeked.
-- A reserving consume that admits opens the reservation in each held
-- part's book, as a reserve script does; its give back drops them.
local mode, n = tonumber(ARGV[1]), tonumber(ARGV[2])
local parts, a, k = {}, 2, 0
for i = 1, n do
  local alg, nk, np = tonumber(ARGV[a + 1]) + 1, tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
  local keys, argv = {}, {}
  for j = 1, nk do keys[j] = KEYS[k + j] end
  for j = 1, np do argv[j] = ARGV[a + 3 + j] end
  parts[i] = {alg, keys, argv, tonumber(ARGV[a + 4 + np]), tonumber(ARGV[a + 5 + np])}
  a, k = a + 5 + np, k + nk
end
local rid, held = ARGV[a + 1], {}
if rid then
  for j = 1, tonumber(ARGV[a + 2]) do
    local b = a + 2 + (j - 1) * 4
    held[j] = {tonumber(ARGV[b + 1]), tonumber(ARGV[b + 2]), tonumber(ARGV[b + 3]), tonumber(ARGV[b + 4]), KEYS[k + j]}
  end
end

local out = {}
-- put writes part i's answer (decide_values' first five values) and mark,
-- and returns the units admitted.
local function put(i, m, admitted, remaining, reset, retry, delay)
  local o = (i - 1) * 6
  out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5], out[o + 6] = admitted, remaining, reset, retry, delay, m
  return admitted
end

if mode == 3 then
  for i, p in ipairs(parts) do
    adjusts[p[1]](p[2], p[3], now, -p[4], p[5])
    put(i, 0, decides[p[1]](p[2], p[3], now, p[4], true))
  end
  for _, h in ipairs(held) do redis.call('HDEL', h[5], rid) end
  return out
end

local all = true
for i, p in ipairs(parts) do
  if put(i, 0, decides[p[1]](p[2], p[3], now, p[4], true)) == 0 then
    all = false
  end
end
if mode ~= 0 or not all then
  return out
end
for i, p in ipairs(parts) do
  local m = marks[p[1]](p[3], now)
  if put(i, m, decides[p[1]](p[2], p[3], now, p[4], false)) == 0 then
    -- Only two parts on one state refuse after their peeks admitted, and
    -- the store sends none: give back what this set took all the same.
    for j = 1, i - 1 do
      local q = parts[j]
      adjusts[q[1]](q[2], q[3], now, -q[4], out[j * 6])
    end
    return redis.error_reply('set: part ' .. i .. ' refused after its peek admitted: two parts share one state')
  end
end
for _, h in ipairs(held) do
  local p = parts[h[1]]
  opens[p[1]](p[2], p[3], h[5], rid, p[4], out[h[1] * 6], h[2], h[3], h[4])
end
return out
