-- set: the parts of requests decided as one (limiter.SetStore), the main
-- part of lua/generated/set.lua, after the preamble, now (µs, Redis's
-- clock) and every algorithm's decide_values, mark and adjust (the
-- sections of lua/<algorithm>.lua) and open (lua/book.lua) in decides,
-- marks, adjusts and opens and its number of keys in nks, by
-- AlgorithmSpec.Index + 1. The log's index is logIndex.
-- KEYS     every set's keys, set after set: its parts' keys, part after
--          part, then the books of the parts it holds
-- ARGV     the number of sets; the number of specs, then each spec: its
--          algorithm's index, number of parameters, the parameters; then
--          per set: its mode (0 consume, 1 peek, 3 give back), number of
--          parts and number of parts it holds in a reservation
--          (limiter.SetReserver; 0: none), then per part: its spec's index
--          (from 0), its cost and, in mode 3, the mark its take answered;
--          then, when it holds any, the reservation's id and, per held
--          part, its index in the set (from 1), expiry policy, hold (µs)
--          and keep (ms)
-- returns  six integers per part, set after set: units admitted (the cost;
--          0 = refused; -1: the set was refused for two parts on one
--          state, which the store never sends), remaining, reset after
--          (µs), retry after (µs), delay (µs), and the take's mark (0
--          unless taken)
-- Consume admits a set only when every part admits it, taking each one's
-- cost (see consume); refused, every part answers as peeked (a part that
-- would admit answers with its cost, having taken nothing). Peek answers
-- so and writes nothing. Give back returns each part's cost, taken at its
-- mark, with the settle arithmetic of reservations (a Cluster's slot
-- group taken before a later group refused), then answers as peeked. The
-- sets of a call are decided one after another, each as if alone. A
-- holding consume that admits opens the reservation in each held part's
-- book, as a reserve script does; its give back drops them.
local nsets, nspecs = tonumber(ARGV[1]), tonumber(ARGV[2])
local specs, a = {}, 2
for s = 1, nspecs do
  local alg, np = tonumber(ARGV[a + 1]) + 1, tonumber(ARGV[a + 2])
  local argv = {}
  for j = 1, np do argv[j] = tonumber(ARGV[a + 2 + j]) end
  specs[s] = {alg, argv, nks[alg]}
  a = a + 2 + np
end

-- The current set's parts, by index, and its held parts, by their order,
-- reused from set to set.
local algs, keys, argvs, costs, charged = {}, {}, {}, {}, {}
local held = {}
local out, o = {}, 0

-- put writes part i's answer (decide_values' first five values) and mark,
-- and returns the units admitted.
local function put(i, m, admitted, remaining, reset, retry, delay)
  local p = o + (i - 1) * 6
  out[p + 1], out[p + 2], out[p + 3], out[p + 4], out[p + 5], out[p + 6] = admitted, remaining, reset, retry, delay, m
  return admitted
end

local function peek(i)
  return decides[algs[i]](keys[i], argvs[i], now, costs[i], true)
end

-- take takes part i's cost, or answers it refused, and returns the units
-- admitted.
local function take(i)
  return put(i, marks[algs[i]](argvs[i], now), decides[algs[i]](keys[i], argvs[i], now, costs[i], false))
end

-- consume decides a set in mode 0: each part's cost taken as it comes, its
-- state read and written once, until one refuses. A log (sliding_log,
-- whose give-back could leave its counter key behind) is peeked, and taken
-- once every part admitted. When a part refuses, what the earlier parts
-- took is given back, at this same instant exactly as if never taken (a
-- state its give-back leaves as good as fresh is deleted), and each of
-- them answers as peeked; a refused take has answered as peeked already.
-- Returns whether the set was admitted.
local function consume(n)
  local all, taken = true, 0
  for i = 1, n do
    if not all then
      put(i, 0, peek(i))
    elseif algs[i] == logIndex then
      if put(i, 0, peek(i)) == 0 then all = false end
    elseif take(i) == 0 then
      all = false
      out[o + i * 6] = 0
    else
      taken = i
    end
  end
  if not all then
    for i = 1, taken do
      local p = o + i * 6
      if algs[i] ~= logIndex and out[p - 5] > 0 then
        adjusts[algs[i]](keys[i], argvs[i], now, -costs[i], out[p])
        put(i, 0, peek(i))
      end
    end
    return false
  end
  for i = 1, n do
    if algs[i] == logIndex and take(i) == 0 then
      -- Only two parts on one state refuse after their peeks admitted:
      -- give back what this set took and answer it as an error.
      for j = 1, n do
        if j < i or (j > i and algs[j] ~= logIndex) then
          adjusts[algs[j]](keys[j], argvs[j], now, -costs[j], out[o + j * 6])
        end
      end
      for j = 1, n do out[o + (j - 1) * 6 + 1] = -1 end
      return false
    end
  end
  return true
end

-- decide decides a set of n parts in mode, of which nheld are held in
-- reservation rid (held[1..nheld]).
local function decide(n, mode, rid, nheld)
  if mode == 0 then
    if consume(n) then
      for j = 1, nheld do
        local h = held[j]
        local i = h[1]
        opens[algs[i]](keys[i], argvs[i], h[5], rid, costs[i], out[o + i * 6], h[2], h[3], h[4])
      end
    end
  elseif mode == 3 then
    for i = 1, n do
      adjusts[algs[i]](keys[i], argvs[i], now, -costs[i], charged[i])
      put(i, 0, peek(i))
    end
    for j = 1, nheld do redis.call('HDEL', held[j][5], rid) end
  else
    for i = 1, n do put(i, 0, peek(i)) end
  end
end

local k = 0
for s = 1, nsets do
  local mode, n, nheld = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
  a = a + 3
  for i = 1, n do
    local spec = specs[tonumber(ARGV[a + 1]) + 1]
    algs[i], argvs[i], costs[i] = spec[1], spec[2], tonumber(ARGV[a + 2])
    a = a + 2
    if mode == 3 then
      charged[i] = tonumber(ARGV[a + 1])
      a = a + 1
    end
    local kt = keys[i]
    if kt == nil then
      kt = {}
      keys[i] = kt
    end
    for j = 1, spec[3] do kt[j] = KEYS[k + j] end
    k = k + spec[3]
  end
  local rid
  if nheld > 0 then
    rid = ARGV[a + 1]
    a = a + 1
    for j = 1, nheld do
      held[j] = {tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4]), KEYS[k + j]}
      a = a + 4
    end
    k = k + nheld
  end
  decide(n, mode, rid, nheld)
  o = o + 6 * n
end
return out
